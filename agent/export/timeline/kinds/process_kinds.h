// Timeline records of processes and of the trace as a whole (the table:
// timeline/record_kinds.h): exec and exit instants on the process's track,
// and what the exporter draws from more than one event: training steps,
// capture windows (--capture) and an attached recording's window.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "export/timeline/arg_list.h"
#include "export/timeline/export_options.h"
#include "export/timeline/map_context.h"
#include "export/timeline/record_kinds.h"

namespace gpuos {

// Also names the process after its new program.
struct ExecKind {
  static constexpr RecordKind kKind = RecordKind::kExec;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kExec;
  static constexpr Shape kShape = Shape::kInstant;
  static constexpr SliceCategory kCategory = SliceCategory::kProcess;
  static constexpr const char* kNames[] = {"exec"};
  struct Payload {
    uint32_t filename;  // StringTable id
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

struct ProcessExitKind {
  static constexpr RecordKind kKind = RecordKind::kProcessExit;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kProcessExit;
  static constexpr Shape kShape = Shape::kInstant;
  static constexpr SliceCategory kCategory = SliceCategory::kProcess;
  static constexpr const char* kNames[] = {"process exit"};
  struct Payload {
    int32_t wait_status;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

// A training step, on its process's "steps" track (pid 0: the trace's).
struct StepKind {
  static constexpr RecordKind kKind = RecordKind::kStep;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::PAYLOAD_NOT_SET;  // the step finder's
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kStep;
  static constexpr const char* kNames[] = {"step"};
  struct Payload {
    int64_t index;
  };
  static absl::Status Add(const StepSpan& step, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

// An attached recording's window, [start_ns, end_ns), on its own
// trace-wide track: nothing outside it was recorded.
struct AttachWindowKind {
  static constexpr RecordKind kKind = RecordKind::kAttachWindow;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::PAYLOAD_NOT_SET;  // the header's
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kProcess;
  static constexpr const char* kNames[] = {"attach window"};
  struct Payload {};
  static absl::Status Add(uint64_t start_ns, uint64_t end_ns, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

// A capture window of a process (--capture): CUDA detail inside.
struct CaptureWindowKind {
  static constexpr RecordKind kKind = RecordKind::kCaptureWindow;
  // Drawn from both edges (CaptureWindowCollector), not from one event.
  static constexpr v1::Event::PayloadCase kSource = v1::Event::PAYLOAD_NOT_SET;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kCuda;
  static constexpr const char* kNames[] = {"capture"};
  struct Payload {
    bool cupti_subscribed;  // opening it subscribed CUPTI again (its first step paid for that)
  };
  static absl::Status Add(uint32_t pid, uint64_t start_ns, uint64_t end_ns, const std::string& reason,
                          bool cupti_subscribed, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

}  // namespace gpuos
