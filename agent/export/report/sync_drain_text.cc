// The idle after syncs and allocation calls in words; see sync_drain_text.h.
#include "export/report/sync_drain_text.h"

#include "absl/strings/str_format.h"
#include "export/report/format.h"

namespace gpuos {

std::string SyncDrainText(const StepAnalysis& a) {
  const StepRecord& t = a.measured_total;
  if (t.gpu.idle_stretches_after_sync == 0) return "";
  return absl::StrFormat(
      "after the driving thread's syncs (it waited for the GPU's queue to run dry): %s ms (%s%% of step time) in %u "
      "stretches; %.1f syncs per step fell between its launches",
      FormatMs3(t.gpu.idle_after_sync_ns), FormatPct1(Share(t.gpu.idle_after_sync_ns, a.measured_wall_ns)),
      t.gpu.idle_stretches_after_sync, a.SyncsBetweenLaunchesPerStep());
}

std::string AllocationDrainText(const StepAnalysis& a) {
  const StepRecord& t = a.measured_total;
  if (t.gpu.idle_allocation_ns == 0) return "";
  return absl::StrFormat(
      "in and after the driving thread's allocation calls (cudaMalloc, cudaFree; a free waits for the GPU's queue "
      "to run dry): %s ms (%s%% of step time); %.1f calls per step",
      FormatMs3(t.gpu.idle_allocation_ns), FormatPct1(Share(t.gpu.idle_allocation_ns, a.measured_wall_ns)),
      a.AllocationsPerStep());
}

}  // namespace gpuos
