// The OS kinds of timeline records (the table: timeline/record_kinds.h):
// off-CPU intervals with their wakeup arrows, mmap/munmap/futex waits on a
// thread's "OS" track, and page faults (a counter only).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "export/timeline/arg_list.h"
#include "export/timeline/map_context.h"
#include "export/timeline/record_kinds.h"

namespace gpuos {

struct OffCpuKind {
  static constexpr RecordKind kKind = RecordKind::kOffCpu;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kOffCpu;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kSched;
  // By OffCpuCause.
  static constexpr const char* kNames[] = {"off-CPU (unknown)", "off-CPU (preempted)", "off-CPU (futex)",
                                           "off-CPU (syscall)", "off-CPU (page fault)"};
  struct Payload {
    uint64_t runqueue_ns;
    int64_t prev_state;
    uint32_t switch_counter;  // the process's context-switch counter track
    uint32_t cause;
    int32_t syscall_nr;
    uint32_t woken_by_tid;
    uint32_t voluntary;
    uint32_t unused;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static CounterAdd Count(const Payload& p, const TimelineRecord& record) {
    return {p.switch_counter, record.ts, record.ts, 1};
  }
};

// One end of a waker -> wakee arrow: an instant on the waker's thread at
// the wakeup, and one on the wakee's off-CPU track.
struct WakeupKind {
  static constexpr RecordKind kKind = RecordKind::kWakeup;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::PAYLOAD_NOT_SET;  // OffCpuKind's
  static constexpr Shape kShape = Shape::kInstant;
  static constexpr SliceCategory kCategory = SliceCategory::kSched;
  static constexpr const char* kNames[] = {"wakes", "woken"};
  struct Payload {
    uint64_t flow_id;
    uint32_t other_tid;  // the wakee on the waker's end, the waker on the wakee's
    uint32_t is_wakee;   // 0 on the waker (the flow's start), 1 on the wakee (its end)
  };
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static FlowEnd Flow(const Payload& p) {
    return {p.is_wakee ? FlowEnd::Role::kEnd : FlowEnd::Role::kStart, p.flow_id};
  }
};

struct MmapKind {
  static constexpr RecordKind kKind = RecordKind::kMmap;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kMmap;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kOs;
  static constexpr const char* kNames[] = {"mmap"};
  struct Payload {
    uint64_t addr;
    uint64_t length;
    int64_t result;
    uint32_t prot;
    uint32_t flags;
    int32_t fd;
    uint32_t unused;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

struct MunmapKind {
  static constexpr RecordKind kKind = RecordKind::kMunmap;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kMunmap;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kOs;
  static constexpr const char* kNames[] = {"munmap"};
  struct Payload {
    uint64_t addr;
    uint64_t length;
    int64_t result;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

struct FutexWaitKind {
  static constexpr RecordKind kKind = RecordKind::kFutexWait;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kFutexWait;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kOs;
  static constexpr const char* kNames[] = {"futex wait"};
  struct Payload {
    uint64_t uaddr;
    int64_t result;
    uint32_t op;
    uint32_t has_timeout;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

// Page faults of a thread since its last report: a contribution to its
// process's faults/s counter, spread from the event to the last fault.
struct PageFaultsKind {
  static constexpr RecordKind kKind = RecordKind::kPageFaults;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kPageFaults;
  static constexpr Shape kShape = Shape::kCounterOnly;
  static constexpr SliceCategory kCategory = SliceCategory::kOs;
  static constexpr const char* kNames[] = {"page faults"};
  struct Payload {
    uint64_t last_ns;
    uint32_t count;
    uint32_t major;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static CounterAdd Count(const Payload& p, const TimelineRecord& record) {
    return {record.track, record.ts, p.last_ns, static_cast<double>(p.count)};
  }
};

}  // namespace gpuos
