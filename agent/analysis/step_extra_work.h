// Steps from marks (optimizer.step ranges, autograd.backward ranges) that
// hold more than a training step's GPU work: the evaluation pass or
// checkpoint that ran between two marks falls into a step.  Such a step
// stays a step but is marked left out and kept out of the summaries, as
// the repeating-sequence finder does with its irregular iterations; a step
// that is only slower (a data stall) with the same work stays measured.
//
// The rule, with the tokens of the GPU work (kernel launches named by their
// kernel, copies by direction and size...) counted between each step's
// bounds:
//   - the steady step's work is the median token count over the steps;
//   - a step's score is the larger of its tokens beyond the median as a
//     share of half the median, and its tokens whose symbols occur in fewer
//     than half of the steps (forward-only evaluation kernels, a
//     checkpoint's device-to-host copies of every tensor) as a share of
//     max(16, 5% of the median); an occasional loss.item() (a copy and a
//     synchronization) scores little;
//   - the steps marked are those whose score stands apart: the highest c
//     scores of the steps not marked already, for the largest c (at most a
//     quarter of the steps) such that the c-th is at least 1 and at least
//     twice the next (work that varies from step to step, as with dynamic
//     shapes or sentences of varied length run token by token, makes a
//     continuum in which no step is told apart);
//   - steps already marked (warm-up) keep their mark; with fewer than 5
//     steps, or no GPU work in the median step, nothing is marked.
// Cost: O(tokens + steps) time, O(symbols + steps) memory.
//
// Without GPU work (a CPU job), an evaluation pass is CPU work of the
// loop's thread with no backward pass in it.  The rule, with each step cut
// at its backward passes' starts into stretches and the CPU time the
// loop's thread ran (not blocked, not preempted: a data stall or a busy
// machine does not count; nor inside its data-loader ranges: a new epoch's
// DataLoader iterator forks its workers, data loading, not extra work) in
// each stretch:
//   - the steady step has the most common number of stretches; around
//     each step, on each side, the up to 8 nearest steps not left out
//     already give the steady step's CPU time (their median) and each
//     stretch position's (so a shared machine whose speed drifts over the
//     run, or changes at once, moves the reference with it);
//   - a step's extra against one side is its largest stretch's CPU time
//     beyond that side's median of that position (a step with fewer
//     stretches: its total beyond the side's median step; one with more,
//     i.e. more backward passes than the steady step, has none: its extra
//     is backward work, a merged step); of the sides with at least 3
//     steps, the one that counts is that whose steady step is closest to
//     the step's CPU time less that extra (the side of the step's own
//     speed), and the extra is taken as a share of its steady step;
//   - the steps left out are those whose extra stands apart: the largest c
//     shares for the smallest c (at most a quarter of the steps) such that
//     the c-th is at least 3/4 and at least twice the next one (noise, a
//     longer batch, a garbage collection make a continuum below; an
//     evaluation pass is most of a step's work or more, above), counting
//     only extras of at least kMinCpuExtraNs (on a VM a thread's "running"
//     time holds what the hypervisor took from it, unseen: spikes of 1.6
//     and 1.9 ms in 1.2 ms steps under load), unless
//     together they are less than 2% of the CPU work of the steps (the mean
//     would move by less than that: a few spikes of a busy machine, a rare
//     garbage collection, are not worth the risk);
//   - a step in which the loop's thread started processes that all ended
//     before its next backward start (an evaluation's DataLoader: a
//     training loader's workers feed that backward pass) is extra work
//     where its extra is at least kMinCpuExtraNs, whether or not it
//     stands apart (a multi-scale detector's batches vary its steps' work
//     as much), unless more than a quarter of the steps are;
//   - before that, where the Python hook's loss.backward() marks cut the
//     stretches, a step that makes at least 2m + 8 other calls of the
//     autograd engine (torch.autograd.grad), m those of the median step,
//     is extra work whatever its CPU time (an evaluation that adapts to
//     each task before it scores, as MAML's: ten times a training
//     iteration's calls), unless more than a quarter of the steps are;
//   - fewer than 5 steps: nothing is marked;
//   - a step in which the loop's thread forked a process, and the step
//     after it, are a new epoch's DataLoader iterator starting its workers
//     (data loading, which the job's own timing counts in the iteration):
//     neither marked nor counted for the break, unless their extra together
//     exceeds what starting the workers costs: kEpochStartMaxExtraSteps
//     steady steps where no data-loader range (no Python hook) holds the
//     fork's own CPU time, plus kForkFaultMaxNs for each page fault of the
//     loop's thread beyond the steady step's (after a fork, each page the
//     parent writes is copied at its first write, into the next iteration:
//     thousands of faults, 37-94 us each in five runs on a VM whose
//     hypervisor shadows the page tables, a few us on bare metal).  An
//     evaluation pass whose own loader forks workers is more work than
//     that (on bare metal, an evaluation of less CPU time than the bound
//     times the faults, often hundreds of ms, stays in the step).
// Cost: O(steps x 16 log 16).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/repeating_sequence.h"
#include "analysis/step_finder.h"

namespace gpuos {

// `steps` sorted by start and not overlapping; `tokens` in time order
// (a token belongs to the step its start falls in).  Returns how many steps
// were newly marked left out; `marked`, where given, gets their indices.
size_t MarkExtraWorkSteps(std::vector<StepWindow>& steps, const std::vector<SequenceToken>& tokens,
                          std::vector<size_t>* marked = nullptr);

// A step from optimizer.step marks that MarkExtraWorkSteps left out often
// ends with a whole iteration: the extra work (an evaluation pass, a
// checkpoint, an epoch's end) runs after one update and before the next
// iteration fetches its data, and between them may come what an epoch's
// start costs (the DataLoader's iterator made again, its workers filling
// their queues), which the job's own timing counts in that iteration.
// Such a step is split in two where the iteration begins, and the
// iteration is measured.  The rule, for each of the `marked` steps:
//   - the extra ends with the last token, before the step's first backward
//     start, of a kind that fewer than half of the steps hold (the
//     evaluation's kernels, the checkpoint's copies, a barrier's wait);
//   - the iteration begins there, when a data fetch (`fetch_starts`,
//     sorted: the Python hook's DataLoader marks on the loop's thread)
//     follows before the first backward start: what comes between is the
//     iteration's (a new epoch's DataLoader iterator waits for its workers
//     to start again before its first fetch; after a checkpoint's last
//     copy only its last bytes are written);
//   - split only when the part from there to the step's end holds the
//     median step's number of backward starts (at least one) and
//     between 2/3 and 3/2 of the median step's tokens.
// Then the step is two: the extra, left out as before, and the iteration,
// measured.  Steps are numbered again in order.  Returns how many steps were
// split.
size_t SplitExtraWorkSteps(std::vector<StepWindow>& steps, const std::vector<SequenceToken>& tokens,
                           const std::vector<size_t>& marked, const std::vector<uint64_t>& fetch_starts,
                           const std::vector<uint64_t>& backward_starts);

// The CPU side of one step: the CPU time the loop's thread ran in each
// stretch between the step's bounds and the starts of the backward passes
// strictly inside it (one stretch when none is).
struct StepCpuWork {
  std::vector<uint64_t> stretches_ns;
  // The loop's thread forked a process within the step.
  bool forked = false;
  // No data-loader range holds the fork, so its CPU time is in the stretches.
  bool fork_in_stretches = false;
  // The loop's thread's page faults within the step.
  uint64_t page_faults = 0;
  // Calls of the autograd engine (the uprobe's) within the step that are
  // not the loop's loss.backward() (the Python hook's, which cut the
  // stretches): torch.autograd.grad's.  0 where the stretches are cut at
  // the uprobe's calls themselves.
  size_t other_engine_calls = 0;
  // The loop's thread forked processes in the step that all ended before
  // its next backward start: an evaluation's DataLoader workers.
  bool evaluation_loader = false;
};
inline constexpr double kEpochStartMaxExtraSteps = 3.0;
inline constexpr uint64_t kForkFaultMaxNs = 120'000;
inline constexpr size_t kMinExtraEngineCalls = 8;
inline constexpr uint64_t kMinCpuExtraNs = 5'000'000;

// `work[i]` for `steps[i]`.  Returns how many steps were newly marked left
// out; `marked`, where given, gets their indices.
size_t MarkExtraCpuWorkSteps(std::vector<StepWindow>& steps, const std::vector<StepCpuWork>& work,
                             std::vector<size_t>* marked = nullptr);

// SplitExtraWorkSteps for a job with no GPU work: no kernel tells where the
// extra work ends, so the iteration's data loading tells where it begins.
// For each of the `marked` steps (MarkExtraCpuWorkSteps'):
//   - the iteration begins at the last data-loader range (`data_ranges`,
//     [start, end) on the loop's thread, sorted, not overlapping) that
//     starts before the step's first backward start, taken back over the
//     ranges that end at most kDataRangeChainNs before the next one starts
//     (a new epoch's `iter(loader)` right before its first fetch; an
//     evaluation's fetches are each followed by its forward pass);
//   - split only when the part from there to the step's end holds the
//     median step's number of backward starts (at least one) and its CPU
//     time (`cpu_ns` over [from, to): the loop's thread running, outside
//     its data ranges) is between 2/3 and 3/2 of the median step's (the
//     totals of `work`, over the steps not left out), or within the 10th
//     to 90th percentile of those where they spread wider: refusing the
//     longer iterations of a loop whose batches vary (a multi-scale
//     detector's) would leave them out and measure the rest short.  More
//     is still an iteration where the part before the cut holds more CPU
//     time than the part after holds beyond the median step (the first
//     iteration after an evaluation runs longer: memory mapped again,
//     caches cold; an iteration reaching back over the evaluation's
//     chained fetches holds the evaluation, and the part before it little).
// The extra before it stays left out; steps are numbered again.  Returns
// how many steps were split.
inline constexpr uint64_t kDataRangeChainNs = 1'000'000;
size_t SplitExtraCpuWorkSteps(std::vector<StepWindow>& steps, const std::vector<size_t>& marked,
                              const std::vector<StepCpuWork>& work,
                              const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges,
                              const std::vector<uint64_t>& backward_starts,
                              const std::function<uint64_t(uint64_t, uint64_t)>& cpu_ns);

}  // namespace gpuos
