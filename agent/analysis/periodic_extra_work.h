// Steps left out as extra work (step_extra_work.h) that recur at one
// period through the whole run are part of every iteration, not
// interruptions of it: an RL loop's rollout before its updates, the updates
// between a rollout's environment steps, a generator's update after k
// critic updates.  Each fold makes one step of k steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analysis/step_finder.h"

namespace gpuos {

// Extra work that recurs at a fixed period and takes a large part of the run
// is part of every iteration, not an interruption of it: a reinforcement-
// learning loop collects a rollout (environment steps and the policy's
// forward passes: no backward pass), then makes k minibatch updates, so
// every k-th step between optimizer marks holds the rollout.  Leaving those
// out would report the updates alone.  The rule, over the steps
// MarkExtraWorkSteps or MarkExtraCpuWorkSteps left out (warm-up aside):
//   - at least 3 of them, at positions with one difference k >= 2 (in
//     practice k >= 4: the marking leaves out at most a quarter of
//     the steps, so a rollout every 2 or 3 updates is never marked), the
//     first within k of the start and the last within k of the end (the
//     work recurs for the whole run);
//   - they hold at least a third of the wall time from the first of them to
//     the end (an evaluation every N steps is a smaller part, and stays
//     left out);
//   - no data fetch (`fetches[i]`: a data-loader range on the loop's
//     thread) inside any of them: an evaluation pass reads its own data.
//     (So the caller folds only steps from the Python hook's marks, which
//     come with its fetch ranges; with the uprobe's, a large evaluation
//     pass and a rollout look alike, and the report says so instead.)
// Then one step is k of them: from the start of a step with the extra work
// to the start of the next; the steps before the first are one step left
// out (that iteration began before the first mark), and so is a last one
// cut short by the job's end.  `period` 0: nothing changed.
struct PeriodicFold {
  uint32_t period = 0;     // k
  double share = 0;        // of the wall time from the first such step on
  uint32_t occurrences = 0;
};
PeriodicFold FoldPeriodicExtraWork(std::vector<StepWindow>& steps, const std::vector<bool>& fetches);

// Steps of a repeating unit with no backward pass in it (at most 1 steady
// step in 20 holds a backward start), beside left-out steps that hold the
// backward passes at one period k (edges as above): the unit is an RL
// loop's environment step, repeated for a rollout, and the left-out
// stretches are its updates.  Then one step is k of them, from the start of
// one update stretch to the next (`share` unset).  An evaluation pass is the
// reverse: the backward passes are in the steady unit.
PeriodicFold FoldAroundTrainingSteps(std::vector<StepWindow>& steps, const std::vector<uint64_t>& backward_starts);

// The steady steps of a repeating unit hold no backward pass (at most 1 in
// 20 holds a start) while at least kMinBackwardOutsideUnit backward passes
// lie in the steps left out: the unit is part of an iteration (an
// environment step), whether or not the updates come at a period
// FoldAroundTrainingSteps can fold at.
inline constexpr size_t kMinBackwardOutsideUnit = 3;
bool UnitHoldsNoBackwardPass(const std::vector<StepWindow>& steps, const std::vector<uint64_t>& backward_starts);

// Left-out steps of a repeating unit that hold more backward passes than
// the steady step does (the median count m) but at most 2m + 1 (many more
// are an evaluation that adapts with torch.autograd.grad before it scores,
// as MAML's, and stay left out), at one period k for the whole
// run (edges as above; a first such step off the period, the warm-up, is
// not counted): the extra work is another update made once every k units,
// as a GAN's generator update after k critic updates (each with its
// gradient penalty's backward pass), not an evaluation pass or checkpoint
// (those add no backward pass).  Then one step is k units, ending with the
// one that holds the extra update (`share` unset).
PeriodicFold FoldExtraTrainingSteps(std::vector<StepWindow>& steps, const std::vector<uint64_t>& backward_starts);

}  // namespace gpuos
