// Block I/O requests: see timeline/kinds/block_io_kind.h.
#include "export/timeline/kinds/block_io_kind.h"

#include "absl/strings/str_cat.h"

namespace gpuos {

std::string BlockDeviceTrackName(uint32_t dev, const std::string& dev_name) {
  if (!dev_name.empty()) return absl::StrCat("disk ", dev_name);
  return absl::StrCat("disk ", dev >> 20, ":", dev & ((1u << 20) - 1));
}

uint32_t BlockIoOperation(const std::string& rwbs) {
  // The kernel's rwbs: an optional F (preflush), then the operation (R, W,
  // D discard, E secure erase, N none), then flags (F FUA, A, S, M).  A
  // lone F is a flush.
  const size_t op = !rwbs.empty() && rwbs[0] == 'F' ? 1 : 0;
  const char c = op < rwbs.size() ? rwbs[op] : '\0';
  if (c == 'R') return 1;
  if (c == 'W') return 2;
  if (c == 'D' || c == 'E') return 3;
  if (op == 1 && (c == '\0' || c == 'N')) return 4;
  return 0;
}

absl::Status BlockIoKind::Map(const v1::Event& event, MapContext& context) {
  const v1::BlockIo& io = event.block_io();
  const uint32_t pid = event.pid();
  const uint32_t track = context.tracks().NamedProcessChild(pid, BlockDeviceTrackName(io.dev(), io.dev_name()));
  // The issuing thread is drawn even where it has no other event.
  if (event.tid() != 0) context.tracks().Thread(pid, event.tid());
  const Payload payload{io.sector(), io.bytes(), context.OptionalName(io.rwbs()), io.error(), event.tid()};
  return context.Emit<BlockIoKind>(MapContext::At(event, io.duration_ns()), track,
                                   context.FixedName(kKind, BlockIoOperation(io.rwbs())), payload);
}

void BlockIoKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Uint("bytes", p.bytes);
  if (p.rwbs != kNoString) args.String("rwbs", args.Name(p.rwbs));
  args.Uint("sector", p.sector);
  if (p.issuing_tid != 0) args.Uint("issuing_tid", p.issuing_tid);
  args.Int("error", p.error);
}

}  // namespace gpuos
