// The measured steps that started a DataLoader's workers again (an epoch's
// iter() without persistent_workers): what they cost beyond the other
// steps, for the dataloader_worker_restarts rule, and the data loading
// inside them, which the data_loader rule leaves to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analysis/repeating_sequence.h"
#include "analysis/step_analysis.h"

namespace gpuos {

struct WorkerRestarts {
  size_t steps = 0;          // measured steps in which the loop's process started processes
  uint32_t starts = 0;       // processes started in them
  uint32_t execs = 0;        // of those, the ones that exec'd a new image (spawn)
  uint64_t step_ns = 0;      // those steps' time
  uint64_t data_stage_ns = 0;  // their data-loading stage
  uint64_t data_wait_ns = 0;   // their CpuParts::data_wait_ns
  uint64_t median_other_ns = 0;  // the median of the other measured steps
  uint64_t excess_ns = 0;    // step_ns beyond median_other_ns each
};

// The step started processes: forks or spawns of the loop's process.
inline bool StartedProcesses(const StepRecord& step) { return step.os.child_starts > 0; }

// All zero when no measured step started a process, or every one did.
WorkerRestarts FindWorkerRestarts(const StepAnalysis& analysis);

// A step the step finder left out as irregular work (its GPU work differs
// from the steady iteration's: an epoch's last, partial batch beside the
// next epoch's first) that started processes is an epoch's start whose
// restart the job's own timing counts: it is measured again, unless it
// launched more than kEpochStartMaxLaunches times the median step's
// kernels (an evaluation whose loader starts workers of its own).
// Only steps whose reason begins with kIrregularWorkReason
// (repeating_sequence.h), past the first `warmup_steps`, and only in a job
// with GPU work.
inline constexpr double kEpochStartMaxLaunches = 3.0;
void KeepEpochStartsMeasured(std::vector<StepRecord>& steps, size_t warmup_steps);

}  // namespace gpuos
