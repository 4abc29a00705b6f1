// The CUDA kinds: see timeline/kinds/cuda_kinds.h.  GPU work's device,
// context and stream are in its track's name: not repeated on every slice.
#include "export/timeline/kinds/cuda_kinds.h"

#include <iterator>

#include "absl/strings/str_cat.h"

namespace gpuos {
namespace {

const char* DirectionName(uint32_t direction) {
  static constexpr const char* kDirections[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                                "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  static_assert(std::size(kDirections) == v1::MEMCPY_PTOP + 1, "one name per MemcpyDirection");
  static_assert(std::size(kDirections) == std::size(GpuMemcpyKind::kNames), "and one slice name each");
  return direction < std::size(kDirections) ? kDirections[direction] : "unknown";
}

const char* MemoryKindName(uint32_t kind) {
  static constexpr const char* kKinds[] = {"unknown", "pageable", "pinned",        "device",
                                           "array",   "managed",  "device static", "managed static"};
  return kind < std::size(kKinds) ? kKinds[kind] : "unknown";
}

const char* SyncKindName(uint32_t kind) {
  static constexpr const char* kKinds[] = {"unknown", "event", "stream wait event", "stream", "context"};
  static_assert(std::size(kKinds) == v1::GpuSync::CONTEXT + 1, "one name per GpuSync.Kind");
  static_assert(std::size(kKinds) == std::size(GpuSyncKind::kNames), "and one slice name each");
  return kind < std::size(kKinds) ? kKinds[kind] : "unknown";
}

uint8_t LowByte(int value) { return static_cast<uint8_t>(static_cast<uint32_t>(value) & 0xff); }

}  // namespace

std::string_view CudaApiDisplayName(std::string_view name) {
  const size_t tag = name.rfind("_v");
  if (tag == std::string_view::npos || tag == 0) return name;
  std::string_view digits = name.substr(tag + 2);
  if (digits.size() < 4) return name;
  for (char c : digits) {
    if (c < '0' || c > '9') return name;
  }
  return name.substr(0, tag);
}

absl::Status CudaApiKind::Map(const v1::Event& event, MapContext& context) {
  const v1::CudaApiCall& call = event.cuda_api();
  const uint32_t tid = event.tid() != 0 ? event.tid() : event.pid();
  const uint32_t track = context.tracks().Thread(event.pid(), tid);
  const uint32_t name =
      call.name().empty()
          ? context.FixedName(kKind, 0)
          : context.strings().Intern(call.driver() ? std::string_view(call.name()) : CudaApiDisplayName(call.name()));
  context.flows().AddApiCall(event.pid(), call.correlation_id());
  return context.Emit<CudaApiKind>(MapContext::At(event, call.duration_ns()), track, name,
                                   {call.correlation_id(), call.cbid(), call.return_value(), call.driver()});
}

void CudaApiKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Uint("correlation_id", p.correlation_id);
  args.Uint("cbid", p.cbid);
  args.Int("return_value", p.return_value);
  args.Bool("driver", p.driver != 0);
}

absl::Status GpuKernelKind::Map(const v1::Event& event, MapContext& context) {
  const v1::GpuKernel& k = event.gpu_kernel();
  const uint32_t track = context.tracks().GpuStream(event.pid(), k.device(), k.context(), k.stream());
  context.tracks().Counter(CounterKind::kGpuBusyPercent, k.device());
  context.flows().AddGpuWork(event.pid(), k.correlation_id());
  const Payload payload{{k.grid_x(), k.grid_y(), k.grid_z()},
                        {k.block_x(), k.block_y(), k.block_z()},
                        k.static_shared_bytes(),
                        k.dynamic_shared_bytes(),
                        k.correlation_id(),
                        k.registers_per_thread(),
                        k.graph_id()};
  return context.Emit<GpuKernelKind>(MapContext::At(event, k.duration_ns()), track,
                                     context.NameOr(k.name(), context.FixedName(kKind, 0)), payload);
}

void GpuKernelKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  std::string& grid = args.Scratch();
  absl::StrAppend(&grid, p.grid[0], ",", p.grid[1], ",", p.grid[2]);
  std::string& block = args.Scratch();
  absl::StrAppend(&block, p.block[0], ",", p.block[1], ",", p.block[2]);
  args.String("grid", grid);
  args.String("block", block);
  args.Int("static_shared_bytes", p.static_shared_bytes);
  args.Uint("dynamic_shared_bytes", p.dynamic_shared_bytes);
  args.Uint("registers_per_thread", p.registers_per_thread);
  args.Uint("correlation_id", p.correlation_id);
  if (p.graph_id != 0) args.Uint("graph_id", p.graph_id);
}

absl::Status GpuMemcpyKind::Map(const v1::Event& event, MapContext& context) {
  const v1::GpuMemcpy& copy = event.gpu_memcpy();
  const uint32_t track = context.tracks().GpuStream(event.pid(), copy.device(), copy.context(), copy.stream());
  context.tracks().Counter(CounterKind::kGpuBusyPercent, copy.device());
  context.flows().AddGpuWork(event.pid(), copy.correlation_id());
  const Payload payload{copy.bytes(),           copy.graph_id(),         copy.correlation_id(),
                        LowByte(copy.direction()), LowByte(copy.src_kind()), LowByte(copy.dst_kind()),
                        copy.async(),           copy.src_device(),       copy.dst_device(),
                        0};
  return context.Emit<GpuMemcpyKind>(MapContext::At(event, copy.duration_ns()), track,
                                     context.FixedName(kKind, static_cast<uint32_t>(copy.direction())), payload);
}

void GpuMemcpyKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Uint("bytes", p.bytes);
  args.String("direction", DirectionName(p.direction));
  args.String("src_kind", MemoryKindName(p.src_kind));
  args.String("dst_kind", MemoryKindName(p.dst_kind));
  args.Bool("async", p.async != 0);
  args.Uint("correlation_id", p.correlation_id);
  if (p.direction == v1::MEMCPY_PTOP) {
    args.Uint("src_device", p.src_device);
    args.Uint("dst_device", p.dst_device);
  }
  if (p.graph_id != 0) args.Uint("graph_id", p.graph_id);
}

absl::Status GpuMemsetKind::Map(const v1::Event& event, MapContext& context) {
  const v1::GpuMemset& set = event.gpu_memset();
  const uint32_t track = context.tracks().GpuStream(event.pid(), set.device(), set.context(), set.stream());
  context.tracks().Counter(CounterKind::kGpuBusyPercent, set.device());
  context.flows().AddGpuWork(event.pid(), set.correlation_id());
  return context.Emit<GpuMemsetKind>(
      MapContext::At(event, set.duration_ns()), track, context.FixedName(kKind, 0),
      {set.bytes(), set.graph_id(), set.correlation_id(), set.value(), LowByte(set.memory_kind()), set.async(), 0});
}

void GpuMemsetKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Uint("bytes", p.bytes);
  args.Uint("value", p.value);
  args.String("memory_kind", MemoryKindName(p.memory_kind));
  args.Bool("async", p.async != 0);
  args.Uint("correlation_id", p.correlation_id);
  if (p.graph_id != 0) args.Uint("graph_id", p.graph_id);
}

absl::Status GpuSyncKind::Map(const v1::Event& event, MapContext& context) {
  const v1::GpuSync& sync = event.gpu_sync();
  // The record names no thread; the flow from its API call shows which.
  const uint32_t track = context.tracks().ProcessChild(event.pid(), TrackKind::kGpuSync);
  const uint32_t kind = static_cast<uint32_t>(sync.kind());
  context.flows().AddGpuWork(event.pid(), sync.correlation_id());
  return context.Emit<GpuSyncKind>(MapContext::At(event, sync.duration_ns()), track, context.FixedName(kKind, kind),
                                   {sync.context(), sync.correlation_id(), kind, sync.stream(), sync.cuda_event_id()});
}

void GpuSyncKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.String("kind", SyncKindName(p.kind));
  args.Uint("correlation_id", p.correlation_id);
  args.Uint("context", p.context);
  args.Uint("stream", p.stream);
  if (p.cuda_event_id != 0) args.Uint("cuda_event_id", p.cuda_event_id);
}

}  // namespace gpuos
