// What `gpuos-trace export` can be asked for, kept apart from the exporter
// so that callers (the CLI, the step analysis) need not see its machinery.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuos {

// One training step, as the step analysis finds it.
struct StepSpan {
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC, like every trace timestamp
  uint64_t end_ns = 0;
  int64_t index = 0;
  // The process whose step this is; 0 puts it on one trace-wide track.
  uint32_t pid = 0;
};

struct ExportOptions {
  // Also write the Chrome trace-event JSON (chrome://tracing, Perfetto's
  // legacy importer) to this path; empty: don't.
  std::string chrome_json_path;
  // Drawn on a "steps" track when non-empty.
  std::vector<StepSpan> steps;
  // Width of the buckets counters (GPU busy %, page faults/s, context
  // switches/s) are computed over.
  uint64_t counter_bucket_ns = 10'000'000;
  // Where sorted runs are spilled; empty: $TMPDIR, else /tmp.
  std::string temp_dir;
  // Memory for sorting in one piece; beyond it, records spill to temp_dir.
  size_t sort_buffer_bytes = 64 << 20;
};

}  // namespace gpuos
