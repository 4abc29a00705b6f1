// One pass, two summaries; see trace_summary.h.
#include "analysis/trace_summary.h"

#include "stream/trace_reader.h"

namespace gpuos {

absl::StatusOr<TraceSummary> SummarizeTrace(const std::string& path) {
  auto reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  OsSummaryBuilder os((*reader)->header());
  CudaSummaryBuilder cuda;
  absl::Status status = ForEachEvent(
      **reader,
      [&](const v1::Event& event) {
        os.Add(event);
        cuda.Add(event);
      },
      [&](const v1::TraceTrailer& trailer) { os.SetTrailer(trailer); });
  TraceSummary summary{os.Finish(), cuda.Finish()};
  if (!status.ok()) summary.os.read_error = std::string(status.message());
  return summary;
}

}  // namespace gpuos
