// The NVTX kinds: see timeline/kinds/nvtx_kinds.h.
#include "export/timeline/kinds/nvtx_kinds.h"

namespace gpuos {
namespace {

void Domain(uint32_t id, ArgList& args) {
  if (id != kNoString) args.String("domain", args.Name(id));
}

}  // namespace

absl::Status NvtxPushPopKind::Map(const v1::Event& event, MapContext& context) {
  const v1::NvtxRange& range = event.nvtx_range();
  const uint32_t pid = event.pid();
  const uint32_t tid = event.tid() != 0 ? event.tid() : pid;
  const TimelineRecord record = MapContext::At(event, range.duration_ns());
  if (range.kind() == v1::NvtxRange::START_END) {
    const uint32_t track = context.tracks().ProcessChild(pid, TrackKind::kNvtxAsync);
    context.tracks().Thread(pid, tid);
    const uint32_t name = context.NameOr(range.name(), context.FixedName(NvtxStartEndKind::kKind, 0));
    return context.Emit<NvtxStartEndKind>(
        record, track, name,
        {context.OptionalName(range.domain()), tid, range.end_tid(), range.color(), range.category()});
  }
  const uint32_t track = context.tracks().Thread(pid, tid);
  const uint32_t name = context.NameOr(range.name(), context.FixedName(kKind, 0));
  return context.Emit<NvtxPushPopKind>(
      record, track, name, {context.OptionalName(range.domain()), range.depth(), range.color(), range.category()});
}

void NvtxPushPopKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  Domain(p.domain, args);
  args.Uint("depth", p.depth);
  if (p.color != 0) args.Uint("color", p.color);
  if (p.category != 0) args.Uint("category", p.category);
}

void NvtxStartEndKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  Domain(p.domain, args);
  args.Uint("start_tid", p.start_tid);
  if (p.end_tid != 0) args.Uint("end_tid", p.end_tid);
  if (p.color != 0) args.Uint("color", p.color);
  if (p.category != 0) args.Uint("category", p.category);
}

absl::Status NvtxMarkKind::Map(const v1::Event& event, MapContext& context) {
  const v1::NvtxMark& mark = event.nvtx_mark();
  const uint32_t tid = event.tid() != 0 ? event.tid() : event.pid();
  const uint32_t track = context.tracks().Thread(event.pid(), tid);
  const uint32_t name = context.NameOr(mark.name(), context.FixedName(kKind, 0));
  return context.Emit<NvtxMarkKind>(MapContext::At(event, 0), track, name, {context.OptionalName(mark.domain())});
}

void NvtxMarkKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) { Domain(p.domain, args); }

}  // namespace gpuos
