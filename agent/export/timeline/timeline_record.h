// The unit the exporter sorts: one timeline item (a slice, an instant or a
// counter contribution) cut down from a .gpuos event to a fixed-size POD, so
// that millions of them can be sorted in memory, spilled to temporary files
// and merged back without any allocation per item.  Which payload field
// means what for each kind is decided in one place, timeline/event_mapper.cc.
#pragma once

#include <cstdint>
#include <type_traits>

namespace gpuos {

enum class RecordKind : uint8_t {
  // Slices.
  kOffCpu,
  kMmap,
  kMunmap,
  kFutexWait,
  kNvtxPushPop,
  kNvtxStartEnd,
  kCudaApi,
  kGpuKernel,
  kGpuMemcpy,
  kGpuMemset,
  kGpuSync,
  kStep,
  kAttachWindow,
  kCaptureWindow,  // --capture: CUDA detail recorded inside
  // Instants.
  kNvtxMark,
  kExec,
  kProcessExit,
  kWakeup,  // one end of a waker -> wakee flow arrow
  // Counter contributions only: nothing is drawn for them.
  kPageFaults,
};

inline bool IsInstant(RecordKind kind) {
  return kind == RecordKind::kNvtxMark || kind == RecordKind::kExec ||
         kind == RecordKind::kProcessExit || kind == RecordKind::kWakeup;
}

inline bool IsGpuWork(RecordKind kind) {
  return kind == RecordKind::kGpuKernel || kind == RecordKind::kGpuMemcpy ||
         kind == RecordKind::kGpuMemset;
}

struct TimelineRecord {
  uint64_t ts;       // start, CLOCK_MONOTONIC ns
  uint64_t dur;      // 0 for instants
  uint64_t ordinal;  // position in the input: makes the order total and stable
  uint32_t track;    // TrackTable index (before any overlap lane is chosen)
  uint32_t name;     // StringTable id
  uint32_t pid;
  RecordKind kind;
  uint8_t unused[3];
  // Kind-specific payload; see timeline/event_mapper.cc.
  uint64_t a[4];
  uint32_t b[4];
};
static_assert(std::is_trivially_copyable<TimelineRecord>::value, "records are moved as bytes");
static_assert(sizeof(TimelineRecord) == 88, "keep records compact: millions are sorted at once");

// Start time first; at equal starts the longer slice first, so that on one
// track a parent begins before the child that starts with it.
inline bool RecordBefore(const TimelineRecord& x, const TimelineRecord& y) {
  if (x.ts != y.ts) return x.ts < y.ts;
  if (x.dur != y.dur) return x.dur > y.dur;
  return x.ordinal < y.ordinal;
}

// RecordBefore as a type, so that std::sort and heaps inline it.
struct RecordOrder {
  bool operator()(const TimelineRecord& x, const TimelineRecord& y) const {
    return RecordBefore(x, y);
  }
};

}  // namespace gpuos
