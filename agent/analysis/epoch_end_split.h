// An epoch's end inside a step from marks: the work after the epoch's last
// update (its evaluation pass, its checkpoint) and before the next epoch's
// DataLoader starts its workers, which a job's own per-iteration timing
// leaves out.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "analysis/step_finder.h"

namespace gpuos {

// A step in which the loop's thread forked workers that fed its training
// (a new epoch's DataLoader iterator starting them; `forks`, sorted, leave
// out processes that ended before the loop's next backward start, an
// evaluation loader's) begins its iteration there: what ran before it
// since the step began is the end of the previous epoch (its evaluation
// pass, its checkpoint, the next cross-validation fold's model and
// loaders), which a job's own per-iteration timing leaves out, as the
// ImageNet example's does (its timer starts with the epoch's loop).  The
// rule, for each step not left out already:
//   - the cut is the first such fork before the step's first backward
//     start, taken back to the start of the data-loader range that holds
//     it (the Python hook's `iter(loader)`).  Every later fork before the
//     backward pass starts workers for the same iteration: several
//     loaders restarted at once (semi-supervised loops draw from a labeled
//     and an unlabeled loader and restart each when it runs out), or one
//     loader's workers slow to fork;
//   - the part before the cut holds at least kMinCpuExtraNs of the loop's
//     CPU time (`cpu_ns`, outside its data ranges) more than the median
//     step that did not fork holds from its start to its first backward
//     start: the old iterator's shutdown and the previous update's tail are
//     no step of their own.  Where steps begin at backward starts (no
//     optimizer marks), that median is the whole step's, since the part
//     also holds the iteration's backward pass and update; that epoch's
//     first iteration is then measured short by those.
// Then the step is two: the epoch's end, left out, and the iteration,
// measured.  Returns how many steps were split; steps are numbered again.
size_t SplitAtEpochStarts(std::vector<StepWindow>& steps, const std::vector<uint64_t>& forks,
                          const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges,
                          const std::vector<uint64_t>& backward_starts,
                          const std::function<uint64_t(uint64_t, uint64_t)>& cpu_ns);

// Steps of backward groups (gradient accumulation found without optimizer
// marks: each step begins at a backward start and holds more than one)
// meet the next epoch after their last backward start instead.  Where the
// CPU time from there to the fork (taken back to its data-loader range)
// is at least kMinCpuExtraNs more than the median tail of the group steps
// that did not fork (last backward start to the step's end), the step is
// left out and ends at the fork, and the next step begins there: the
// epoch's first step holds its workers' start, as the job's own timing
// counts it, and not the evaluation before it.  Returns how many steps
// ended early.
size_t EndEpochsInGroups(std::vector<StepWindow>& steps, const std::vector<uint64_t>& forks,
                         const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges,
                         const std::vector<uint64_t>& backward_starts,
                         const std::function<uint64_t(uint64_t, uint64_t)>& cpu_ns);

}  // namespace gpuos
