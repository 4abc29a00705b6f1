// `gpuos-trace export FILE -o out.pftrace [--format json]`: turns a .gpuos
// trace into a Perfetto trace (and optionally Chrome trace-event JSON) for
// ui.perfetto.dev, trace_processor or chrome://tracing.
//
// Two passes, in bounded memory whatever the trace's size:
//   1. read the .gpuos stream once; each event becomes a fixed-size record on
//      a track (timeline/event_mapper.h), fed to an external sort
//      (timeline/record_sorter.h) because CUDA records arrive seconds late;
//   2. merge the sorted records and write them out in time order
//      (timeline/timeline_emitter.h -> perfetto/perfetto_trace_writer.h and
//      chrome_json/chrome_json_writer.h).
// Outputs are written beside their final path and renamed into place, so a
// failed export leaves no half-written file under the requested name.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "export/timeline/export_options.h"

namespace gpuos {

struct ExportSummary {
  uint64_t events_read = 0;
  uint64_t records_sorted = 0;
  uint64_t sort_runs_spilled = 0;
  uint64_t sort_bytes_spilled = 0;
  uint64_t tracks = 0;
  uint64_t overflow_lanes = 0;
  uint64_t slices = 0;
  uint64_t instants = 0;
  uint64_t counter_values = 0;
  uint64_t flows = 0;
  uint64_t perfetto_packets = 0;
  uint64_t perfetto_bytes = 0;
  uint64_t chrome_json_events = 0;
  // Not OK when the input was damaged: everything before the damage was
  // exported, and this says where the damage starts.
  absl::Status input_status;
};

// Writes `out_path` (and options.chrome_json_path if set).  Fails without
// writing when the input cannot be opened or an output cannot be written.
absl::StatusOr<ExportSummary> ExportTrace(const std::string& in_path, const std::string& out_path,
                                          const ExportOptions& options);

// ExportTrace for the CLI: the outputs are written even from a damaged input,
// whose DataLoss status is then returned so the command can say so and exit
// non-zero.
absl::Status ExportPerfetto(const std::string& in_path, const std::string& out_path,
                            const ExportOptions& options);

}  // namespace gpuos
