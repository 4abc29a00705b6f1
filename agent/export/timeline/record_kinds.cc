// The table of timeline record kinds: see timeline/record_kinds.h.  One
// line per kind; the compiler checks that it lists every kind once, in
// RecordKind order, and that each kind's payload fits a record.
#include "export/timeline/record_kinds.h"

#include <iterator>
#include <type_traits>
#include <utility>

#include "export/timeline/kinds/block_io_kind.h"
#include "export/timeline/kinds/cuda_kinds.h"
#include "export/timeline/kinds/nvtx_kinds.h"
#include "export/timeline/kinds/os_kinds.h"
#include "export/timeline/kinds/process_kinds.h"

namespace gpuos {
namespace {

template <class K, class = void>
struct HasMap : std::false_type {};
template <class K>
struct HasMap<K, std::void_t<decltype(&K::Map)>> : std::true_type {};
template <class K, class = void>
struct HasFlow : std::false_type {};
template <class K>
struct HasFlow<K, std::void_t<decltype(&K::Flow)>> : std::true_type {};
template <class K, class = void>
struct HasCount : std::false_type {};
template <class K>
struct HasCount<K, std::void_t<decltype(&K::Count)>> : std::true_type {};
template <class K, class = void>
struct GpuBusy : std::false_type {};
template <class K>
struct GpuBusy<K, std::void_t<decltype(K::kGpuBusy)>> : std::bool_constant<K::kGpuBusy> {};

// A record of kind K always carries a K::Payload (MapContext::Emit<K>).
template <class K>
void DescribeAs(const TimelineRecord& record, ArgList& args) {
  K::Describe(GetPayload<typename K::Payload>(record), record, args);
}
template <class K>
FlowEnd FlowOf(const TimelineRecord& record) {
  return K::Flow(GetPayload<typename K::Payload>(record));
}
template <class K>
CounterAdd CountOf(const TimelineRecord& record) {
  return K::Count(GetPayload<typename K::Payload>(record), record);
}

template <class K>
constexpr RecordKindInfo Info() {
  static_assert(IsRecordPayload<typename K::Payload>(), "a payload is padding-free and fits 48 bytes");
  static_assert(HasMap<K>::value == (K::kSource != v1::Event::PAYLOAD_NOT_SET),
                "a kind with a source event maps it, one without has no Map(event)");
  absl::Status (*map)(const v1::Event&, MapContext&) = nullptr;
  if constexpr (HasMap<K>::value) map = &K::Map;
  FlowEnd (*flow)(const TimelineRecord&) = nullptr;
  if constexpr (HasFlow<K>::value) flow = &FlowOf<K>;
  CounterAdd (*count)(const TimelineRecord&) = nullptr;
  if constexpr (HasCount<K>::value) count = &CountOf<K>;
  return {K::kKind,  K::kSource, K::kShape,      K::kCategory, GpuBusy<K>::value, K::kNames,
          std::size(K::kNames), map, &DescribeAs<K>, flow, count};
}

constexpr RecordKindInfo kKinds[] = {
    Info<OffCpuKind>(),
    Info<WakeupKind>(),
    Info<MmapKind>(),
    Info<MunmapKind>(),
    Info<FutexWaitKind>(),
    Info<PageFaultsKind>(),
    Info<BlockIoKind>(),
    Info<NvtxPushPopKind>(),
    Info<NvtxStartEndKind>(),
    Info<NvtxMarkKind>(),
    Info<CudaApiKind>(),
    Info<GpuKernelKind>(),
    Info<GpuMemcpyKind>(),
    Info<GpuMemsetKind>(),
    Info<GpuSyncKind>(),
    Info<ExecKind>(),
    Info<ProcessExitKind>(),
    Info<StepKind>(),
    Info<AttachWindowKind>(),
    Info<CaptureWindowKind>(),
};

constexpr bool InKindOrder() {
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    if (static_cast<size_t>(kKinds[i].kind) != i) return false;
  }
  return std::size(kKinds) == kRecordKindCount;
}
static_assert(InKindOrder(), "kKinds lists every RecordKind once, in order");

}  // namespace

const RecordKindInfo& KindInfo(RecordKind kind) { return kKinds[static_cast<size_t>(kind)]; }

}  // namespace gpuos
