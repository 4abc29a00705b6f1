// A new epoch's restart of a DataLoader with persistent workers, found at
// the end of a step that holds extra work, and moved into the next step.
//
// Steps that begin at backward starts (the uprobe's or the hook's backward
// marks, or groups of them) hold the end of one iteration (its backward
// passes and update) and the start of the next (its data fetch and forward
// pass).  Where an evaluation ran after an epoch's last update, its step
// (marked left out by MarkExtraCpuWorkSteps or MarkExtraWorkSteps) also
// holds the next epoch's loader restart: with persistent workers, iter()
// tells the workers to resume and waits for them and for the first
// batches.  That wait is no evaluation: a job's own per-iteration timing
// counts it in the epoch's first iteration, as it counts an epoch's first
// fetch, and leaving it out measures the steps short by the restart once an
// epoch.  (Workers forked again each epoch are found by their forks:
// SplitAtEpochStarts, epoch_end_split.h.)
//
// The rule, for each marked step whose next step follows it directly:
//   - the loop's waits for the training workers: its off-CPU intervals
//     that a thread of a worker process ended, from the processes that
//     ended such a wait in at least kMinRestartWorkerSteps measured steps
//     (an evaluation loader's own workers wake the loop only in the
//     evaluations' steps: their waits are the evaluation's);
//   - the restart is there when the waits starting after the step's last
//     backward start sum to at least kMinCpuExtraNs more than the measured
//     steps' median of the same (a steady step waits there for its next
//     batch, if at all);
//   - then the step ends, and the next begins, at the first of those waits.
// The next step then holds the restart, the fetch and forward pass of the
// epoch's first iteration, its backward passes and update, and the next
// iteration's fetch and forward pass: as any step here, with the restart
// on top.  The left-out part keeps the backward passes and update of the
// epoch's last iteration, so over an epoch the measured steps hold all but
// that, in one step fewer than its iterations: their mean runs long by a
// fetch and forward pass over the epoch's steps, where leaving the restart
// out ran it short by the whole restart over them.
// Returns how many restarts were moved; `restart_wait_ns`, where given,
// gets the waits moved (sum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "analysis/step_extra_work.h"
#include "analysis/step_finder.h"

namespace gpuos {

inline constexpr size_t kMinRestartWorkerSteps = 2;

// `waits` (step_finder.h) sorted by start; `worker_pids`: the loop's worker processes
// (StepPlan::worker_pids); `backward_starts` sorted; `marked`: the steps
// the extra-work rules marked.
size_t MoveLoaderRestarts(std::vector<StepWindow>& steps, const std::vector<size_t>& marked,
                          const std::vector<uint64_t>& backward_starts, const std::vector<LoopWait>& waits,
                          const absl::flat_hash_set<uint32_t>& worker_pids, uint64_t* restart_wait_ns = nullptr);

}  // namespace gpuos
