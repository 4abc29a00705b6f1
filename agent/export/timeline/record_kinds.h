// The table of what each kind of timeline record is: the event it comes
// from, how it is drawn (slice, instant, counter contribution only), its
// category, its flow end and counter contribution, and how it is mapped
// (pass 1: event -> record on a track, with a name and a typed payload) and
// described (pass 2: record -> debug annotations).  Each kind is one struct
// (timeline/kinds/), listed once in record_kinds.cc; adding a kind means a
// RecordKind value here, its struct and one line of the table.
//
// A kind struct K has:
//   kKind, kSource (the v1::Event payload it maps; PAYLOAD_NOT_SET when the
//   records come from another kind's mapping or from the exporter itself),
//   kShape, kCategory, kNames (its fixed record names, interned once),
//   struct Payload (padding-free, <= 48 bytes: timeline/timeline_record.h),
//   static absl::Status Map(const v1::Event&, MapContext&)   when kSource is set,
//   static void Describe(const Payload&, const TimelineRecord&, ArgList&),
// and optionally kGpuBusy (counts toward its device's busy %),
//   static FlowEnd Flow(const Payload&), static CounterAdd Count(const
//   Payload&, const TimelineRecord&).
// MapContext::Emit<K> stores a K::Payload in a record of kind K, and the
// table reads it back only as K::Payload: the layout is one type, checked
// by the compiler, not a convention of slots.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "export/timeline/timeline_record.h"
#include "export/timeline/timeline_sink.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class ArgList;
class MapContext;

enum class RecordKind : uint8_t {
  kOffCpu,
  kWakeup,  // one end of a waker -> wakee flow arrow
  kMmap,
  kMunmap,
  kFutexWait,
  kPageFaults,
  kBlockIo,
  kNvtxPushPop,
  kNvtxStartEnd,
  kNvtxMark,
  kCudaApi,
  kGpuKernel,
  kGpuMemcpy,
  kGpuMemset,
  kGpuSync,
  kExec,
  kProcessExit,
  kStep,
  kAttachWindow,
  kCaptureWindow,  // --capture: CUDA detail recorded inside
  kCount,
};
inline constexpr size_t kRecordKindCount = static_cast<size_t>(RecordKind::kCount);

enum class Shape : uint8_t {
  kSlice,
  kInstant,
  kCounterOnly,  // a counter contribution: nothing is drawn for it
};

// Which flow arrow a record is an end of.
struct FlowEnd {
  enum class Role : uint8_t {
    kNone,
    kCudaCall,  // id: correlation id; matched by FlowTable
    kCudaWork,  // id: correlation id; matched by FlowTable
    kStart,     // id: the flow id, ended by a later record
    kEnd,
  };
  Role role = Role::kNone;
  uint64_t id = 0;
};

// An amount spread over [start, end) of a counter track (all of it in the
// bucket of `start` when end <= start): CounterBuckets::Add.
struct CounterAdd {
  uint32_t track = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  double amount = 0;
};

struct RecordKindInfo {
  RecordKind kind;
  v1::Event::PayloadCase source;
  Shape shape;
  SliceCategory category;
  bool gpu_busy;
  const char* const* names;
  size_t name_count;
  absl::Status (*map)(const v1::Event&, MapContext&);  // null without a source
  void (*describe)(const TimelineRecord&, ArgList&);
  FlowEnd (*flow)(const TimelineRecord&);      // null: never a flow end
  CounterAdd (*count)(const TimelineRecord&);  // null: adds to no counter
};

const RecordKindInfo& KindInfo(RecordKind kind);

}  // namespace gpuos
