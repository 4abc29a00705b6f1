// The training iteration as the repeating unit of what a job does, for
// traces with no step marks: given the time-ordered tokens of one process's
// work (a kernel launch named by its kernel, a copy by its direction and
// size, a CPU thread's syscall...), find the unit that repeats and cut the
// trace into iterations.
//
// The rule:
//   - anchors: symbols that occur at least min_iterations times, grouped by
//     occurrence count; the count groups with the most tokens (count x
//     symbols) are tested, and the groups with the most symbols (half as
//     many), a few symbols each.  A training iteration makes most of its
//     symbols once, so the iteration count is the count shared by many
//     symbols, though its group may be light: an optimizer step after
//     accumulated micro-batches is a few tokens beside their many, and the
//     micro-batches alone split badly (the first after zero_grad() assigns
//     gradients, the others add to them);
//   - each anchor splits the sequence at its occurrences; the segments'
//     symbol sequences are compared: the most frequent one is the steady
//     iteration, and a segment within a small tolerance of it (the same
//     length +-2%, symbol counts differing by at most 2% of its tokens, at
//     least 2: an occasional extra memset) counts as steady too;
//   - a segmentation qualifies when at least min_iterations segments and
//     min_segment_share of them are steady, steady segments hold at least
//     min_token_share of the tokens from the first steady segment to the
//     last (start-up, with its many one-off events, is outside) and
//     min_time_share of the time from the first token to the last (or, after
//     a long start-up, there are 20 or more and they cover 60% of the time
//     from the first steady segment to the last), and a
//     steady segment lasts at least
//     min_period_ns (per-kernel repetition is not a step); a unit of at
//     most 3 tokens must also recur at steady intervals (CV of its
//     durations <= 0.5, the longest 10% set aside), as one kernel launched
//     over and over repeats whatever its timing;
//   - among qualifying ones the highest share of the trace's time in steady
//     segments wins (a per-layer anchor in a model of identical layers splits well but
//     covers only the forward pass; an anchor inside a gradient-accumulation
//     micro-batch leaves the optimizer's segment out), near ties (within
//     0.03) going to the finer one (a logging call every 2 iterations also
//     splits well, into pairs); two are compared over the time from where
//     both have begun to repeat (a coarse unit, an epoch, counts the warm-up
//     iterations inside its first segment as steady where the iteration's
//     unit leaves them out);
//   - except: when a finer qualifying segmentation (twice the steady
//     segments at least, its unit's symbols making 75% of the coarse
//     unit's tokens) has irregular segments at least twice its steady length (the extra is as big as an iteration
//     itself: an evaluation pass every few hundred iterations, which a
//     symbol made once per evaluation would otherwise turn into the unit),
//     the best finer one by the same measure wins; an optimizer step, the extra of a
//     gradient-accumulation micro-batch, is smaller than a forward and
//     backward pass; where the job's backward passes are known, not a finer
//     unit that holds none while the coarse one does (an RL loop's
//     environment step, repeated for a rollout before the updates), nor one
//     whose irregular segments hold more backward passes than its steady
//     ones (the extra is training: MAML's meta-update after its tasks);
//     where the optimizer's updates are known by their kernels
//     (update_symbols), not a finer unit that holds none while the coarse
//     one does (a micro-batch of an accumulation group, whatever its
//     extra's size); and a finer unit that holds an update wins, whatever
//     its extra's size, when the coarse one holds at least twice its
//     updates and its backward passes (with the backward passes known):
//     the coarse unit is an epoch of iterations, its extra the evaluation
//     and checkpoint between epochs;
//   - the cut inside the cycle: before the iteration's first token marked
//     preferred (the caller marks the input's host-to-device copy), else
//     before the position with the largest median time gap, where the job
//     waits (for data), so that the wait starts the step as it does for
//     optimizer.step-based steps; the boundary is the end of the token
//     before the cut (with tokens_are_waits: before the longest median
//     token, and the boundary is its start);
//   - iterations are the windows between consecutive cuts (contiguous);
//     each is compared with the steady iteration again, and one that differs
//     is left out with the reason: a leading run is warm-up (autotuning,
//     compilation), a trailing one the end of the run (a smaller last
//     batch), one in between an evaluation pass, checkpoint or epoch
//     boundary; except, with tokens_are_waits, one in between with fewer
//     tokens that took at least the steady iterations' median time: its
//     thread blocked at fewer points (a batch ready, a wait that became a
//     preemption), not less work, and it stays (batch inference on a noisy
//     VM: 29 of 105 such, 30.6 ms against 27.5, were left out).
// Cost: O(tokens) per anchor tested, memory O(tokens + symbols).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuos {

// How a left-out unit with more work than the steady iteration's begins
// its reason.
inline constexpr char kIrregularWorkReason[] = "extra work in the iteration";

struct SequenceToken {
  uint32_t symbol = 0;  // dense ids from 0, interned by the caller
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

struct PeriodOptions {
  uint32_t min_iterations = 5;
  double min_segment_share = 0.6;
  double min_token_share = 0.4;
  // Steady iterations must cover this share of the time from the first
  // token to the last: a few alike moments of start-up (library loading)
  // are no training loop.
  double min_time_share = 0.2;
  uint64_t min_period_ns = 100'000;
  // Count groups tested, and anchors tested per group.
  uint32_t count_groups = 12;
  uint32_t anchors_per_group = 2;
  // Near-match tolerance, as a share of the steady iteration's tokens.
  double tolerance = 0.02;
  // False: tokens are work (kernel launches) and the job waits between
  // them, so a step starts after the token before the longest median gap.
  // True: tokens are the waits themselves (a thread blocked), so a step
  // starts at the token with the longest median duration.
  bool tokens_are_waits = false;
  // Where the job's backward passes began (sorted; empty: not known).  A
  // finer unit with none in its steady segments, against a coarse one with
  // them, is no training iteration: the rollout an RL loop repeats before
  // its updates, not iterations with an evaluation pass between them.
  std::vector<uint64_t> backward_starts;
  // Symbols of an optimizer update's kernels, by symbol id (empty: not
  // known): PyTorch's foreach and fused optimizers, apex's and DeepSpeed's
  // launch multi_tensor_apply kernels, and only for the update (gradient
  // clipping, unscaling, the step).
  std::vector<bool> update_symbols;
};

struct Iteration {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  size_t first_token = 0;
  size_t tokens = 0;
  // Empty for a steady iteration; else why it was left out.
  std::string left_out;
  bool warmup = false;  // left out as warm-up (a leading run)
};

struct PeriodResult {
  bool found = false;
  // When not found: why (the best segmentation tried and what it missed).
  std::string why_not;
  std::vector<Iteration> iterations;  // contiguous, in time order
  uint32_t anchor_symbol = 0;         // the symbol whose occurrences split the trace
  uint32_t cut_symbol = 0;            // the token each iteration starts with
  bool cut_preferred = false;         // the cut is before a preferred token
  size_t unit_tokens = 0;             // tokens of the steady iteration
  size_t steady = 0;                  // steady iterations
  double token_share = 0;             // share of all tokens in steady iterations
  double time_share = 0;              // share of the tokens' time span in steady iterations
  size_t anchors_tested = 0;
  size_t tokens_before = 0;  // tokens before the first cut (not in a step)
  size_t tokens_after = 0;   // tokens from the last cut on (not in a step)
};

// `tokens` in time order.  `preferred_cut[symbol]` (may be shorter than the
// symbol range) marks symbols a step should start with.
PeriodResult FindRepeatingSequence(const std::vector<SequenceToken>& tokens, const std::vector<bool>& preferred_cut,
                                   const PeriodOptions& options);

}  // namespace gpuos
