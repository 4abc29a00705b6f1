// Gradient accumulation seen from the CPU: whether backward passes come k at
// a time, one optimizer update after every k-th, for steps from backward
// marks (the autograd uprobe's, the Python hook's) where nothing marks the
// optimizer step.  The evidence is the work between consecutive backward
// passes: the interval after the k-th backward pass of a group also runs
// the update (gradient clipping, the optimizer, zero_grad), so it is the
// busiest of its group, group after group, at the same position.
//
// The rule, given the CPU time the loop's thread ran (on-CPU, not blocked,
// not preempted: a data stall or a busy machine does not count) in each
// interval between consecutive backward passes:
//   - for every k in 2..max_k and phase p in 0..k-1, each interval j with
//     j % k == p and j >= k-1 closes a group of k (j-k+1..j); the group
//     "wins" when interval j ran longer than every other interval of it;
//   - (k, p) qualifies when at least min_win_share of its groups win, when
//     that many wins are unlikely by chance (a binomial tail, each group
//     winning with probability 1/k, below max_chance shared among all the
//     (k, p) pairs and chains tried, 35 + 7 for max_k 8: enough groups; 5
//     wins of 7 at k=7 is not), and
//     when the median of the phase-p intervals is at least min_ratio times
//     the others' median (the update is real work, not a tie broken by
//     noise);
//   - the smallest qualifying k wins, with its best phase, unless a
//     multiple of it qualifies with a win share at least 0.1 higher (with
//     accumulation of k, a divisor d of k wins in the groups that hold an
//     update and 1/d of the others: 3/4 for k=4, d=2), which then wins; a
//     larger k that qualifies too must be a multiple of it (a second
//     periodic extra, such as logging every other optimizer step); a
//     qualifying k that is neither a multiple nor a divisor makes the
//     grouping ambiguous, and then nothing is grouped;
//   - no qualifying k: one backward pass is one step (no accumulation, or
//     an update too small to tell apart from the noise), unless a period
//     qualifies whose phase changes now and then (below).
// Loops that count micro-batches per epoch (`(i + 1) % k == 0` with `i`
// from `enumerate(loader)`, Lightning's and Hugging Face's trainers) start
// a new group with each epoch, so where an epoch's batches are not a
// multiple of k the phase moves at every epoch's end: the last group is
// shorter (the trainer steps at the epoch's end) or longer (the next
// epoch's first group takes it over).  No fixed phase wins then.  Where no
// (k, phase) qualifies, each k is tried again as a chain of updates, at
// most 2k-1 intervals apart: the chain with the most wins among its groups
// of k, each group of another size costing kPhaseChangeCost wins and not
// counted, and allowed only where it holds an epoch's start (the training
// DataLoader forked its workers).  Without that, quasi-periodic work whose
// phase drifts (Python's garbage collector every few iterations of a loop
// with no accumulation: a chain of k=4 won 71% of its groups) would pass
// for accumulation.  Such a chain qualifies as a (k, phase) does, its chance
// multiplied by the number of ways to place its phase changes among its
// groups (random work of 40-440 intervals: 0 of 12,000 series grouped by
// a chain).  A chain of the period found with a fixed phase, or of a
// multiple of it, that wins clearly more often is the period (a phase that
// moves by 2 at k=4 keeps k=2's phase fixed).
// Evaluation passes and checkpoints fall into update intervals (they run
// after an optimizer step) and only make those busier.  A loop without
// accumulation that does much more CPU work every k-th iteration (costly
// logging every other step) looks the same from the CPU and would be
// grouped too: the note shows the evidence.
// Cost: O(n * max_k^3) time for n intervals (a chain of k is O(n * k^2)), O(n)
// memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuos {

struct AccumulationOptions {
  uint32_t max_k = 8;
  // An SGD update of 8% of a micro-batch's CPU time won 79% of its groups
  // on a noisy 2-CPU VM (chance 1e-10); with no period, 1/k win.
  double min_win_share = 0.7;
  double max_chance = 1e-3;
  double min_ratio = 1.05;
};

struct AccumulationPeriod {
  bool found = false;
  bool ambiguous = false;  // two periods that do not divide each other both qualify
  uint32_t k = 1;          // backward passes per optimizer step
  uint32_t phase = 0;      // interval j (after backward pass j) holds the update when j % k == phase
  // Where the phase changes: the intervals that hold an update, in order
  // (empty for a fixed phase), and how many groups are not of k.
  std::vector<size_t> updates;
  size_t phase_changes = 0;
  size_t groups = 0;       // of the chosen (or, not found, the closest) period
  size_t wins = 0;
  double ratio = 0;                // median CPU time, update intervals vs the others
  uint64_t update_median_ns = 0;   // median CPU time of the update intervals
  uint64_t other_median_ns = 0;    // of the others
  std::string evidence;            // for the note: the numbers, found or not
};

// `work_ns[j]`: the CPU time of the interval after backward pass j (to the
// next one), in time order; `epoch_starts[j]`: whether an epoch starts in
// interval j (empty: nowhere known, so the phase is fixed).
AccumulationPeriod FindAccumulationPeriod(const std::vector<uint64_t>& work_ns,
                                          const std::vector<bool>& epoch_starts = {},
                                          const AccumulationOptions& options = AccumulationOptions());

// Where a found period's updates are: the intervals j that hold an
// optimizer update, in order.  A period whose phase changes: its chain.
//   - Where the update stands clear (its median at least kClearUpdateRatio
//     times the median of the busiest other position of the group), the
//     chain of intervals at least k apart that look most like updates,
//     by their CPU time against the geometric mean of those two medians
//     (the threshold), a group longer than k costing as much as three
//     intervals that do not look like one.  Noise inside a group then
//     never cuts it, and a run of backward passes with no update between
//     them (an evaluation that adapts to each task with torch.autograd.grad
//     before it scores, as MAML's does) makes one long group whatever its
//     length.
//   - Otherwise, or where more than 1 in 20 of the chosen intervals ran
//     below the threshold, every k-th interval at the period's phase.
inline constexpr double kClearUpdateRatio = 2.0;
// What a group of another size than k costs a chain whose phase changes, in
// wins: an epoch's end every few dozen groups is worth it, noise is not.
inline constexpr size_t kPhaseChangeCost = 3;
// The CPU time from which an interval holds a clear update (the geometric
// mean above), or 0 where the update does not stand clear.
double ClearUpdateThreshold(const std::vector<uint64_t>& work_ns, const AccumulationPeriod& period);
std::vector<size_t> UpdateIntervals(const std::vector<uint64_t>& work_ns, const AccumulationPeriod& period);

}  // namespace gpuos
