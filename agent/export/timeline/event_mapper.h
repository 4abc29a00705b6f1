// What each .gpuos event becomes on the exported timeline, in one place:
// EventMapper (pass 1) turns events into TimelineRecords on the right track
// and notes track names and flow ends; RecordDescriber (pass 2) turns a
// record back into a name, a category and debug annotations.  The payload
// layout of each RecordKind is private to this pair.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "export/timeline/export_options.h"
#include "export/timeline/flow_table.h"
#include "export/timeline/record_sorter.h"
#include "export/timeline/string_table.h"
#include "export/timeline/timeline_record.h"
#include "export/timeline/timeline_sink.h"
#include "export/timeline/track_table.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": CUPTI's runtime callback
// names end in "_v" and a version of four or more digits.  Other names
// (driver calls such as "cuMemcpyHtoD_v2" are real symbols) are kept.
std::string_view CudaApiDisplayName(std::string_view name);

class EventMapper {
 public:
  EventMapper(const v1::TraceHeader& header, TrackTable* tracks, StringTable* strings,
              FlowTable* flows, RecordSorter* sorter);

  absl::Status Add(const v1::Event& event);
  absl::Status AddStep(const StepSpan& step);
  // An attached recording's window, [start_ns, end_ns), on its own
  // trace-wide track: nothing outside it was recorded.
  absl::Status AddAttachWindow(uint64_t start_ns, uint64_t end_ns);
  // A capture window of process `pid` (--capture): CUDA detail inside.
  absl::Status AddCaptureWindow(uint32_t pid, uint64_t start_ns, uint64_t end_ns, const std::string& reason);

  uint64_t events() const { return events_; }
  uint64_t records() const { return ordinal_; }

 private:
  TimelineRecord NewRecord(const v1::Event& event, RecordKind kind, uint64_t dur);
  absl::Status Emit(TimelineRecord record);
  // The two ends of a flow arrow from the thread that woke `event`'s
  // thread (at the wakeup) to its off-CPU slice.
  absl::Status EmitWakeup(const v1::Event& event, uint32_t offcpu_track);

  const v1::TraceHeader& header_;
  TrackTable* tracks_;
  StringTable* strings_;
  FlowTable* flows_;
  RecordSorter* sorter_;
  uint64_t events_ = 0;
  uint64_t ordinal_ = 0;
  // Processes with events: a waker outside them is not drawn.
  absl::flat_hash_set<uint32_t> pids_;
  uint32_t wakes_name_;
  uint32_t woken_name_;
  // Ids of the fixed names, interned once.
  uint32_t mmap_name_;
  uint32_t munmap_name_;
  uint32_t futex_name_;
  uint32_t exec_name_;
  uint32_t exit_name_;
  uint32_t memset_name_;
  uint32_t unnamed_name_;
  uint32_t no_domain_;
  std::vector<uint32_t> off_cpu_names_;  // by OffCpuCause
  std::vector<uint32_t> memcpy_names_;   // by MemcpyDirection
  std::vector<uint32_t> sync_names_;     // by GpuSync.Kind
};

class RecordDescriber {
 public:
  RecordDescriber(const v1::TraceHeader& header, const StringTable& strings);
  // Sets event->name, name_id, category and args (valid until the next call);
  // leaves the flow ids alone.
  void Describe(const TimelineRecord& record, SliceEvent* event);

 private:
  DebugArg& Arg(const char* key);
  void Int(const char* key, int64_t value);
  void Uint(const char* key, uint64_t value);
  void Pointer(const char* key, uint64_t value);
  void Bool(const char* key, bool value);
  void String(const char* key, std::string_view value);

  const v1::TraceHeader& header_;
  const StringTable& strings_;
  std::vector<DebugArg> args_;
  std::string grid_;
  std::string block_;
  std::string target_pids_;
};

}  // namespace gpuos
