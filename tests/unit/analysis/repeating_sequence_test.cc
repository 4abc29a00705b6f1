// FindRepeatingSequence on constructed token streams: a steady loop (and
// where in the cycle it cuts), gradient accumulation (the unit is the whole
// optimizer step), a model of identical layers (a per-layer anchor must not
// win), interleaved evaluation passes (left out, not merged into the unit),
// an RL loop's rollout (part of the iteration where the backward passes
// are known), an epoch that holds the warm-up (not the unit), MAML's
// meta-update after its tasks (the iteration, not the task), an epoch of
// iterations and a micro-batch told apart by the optimizer's update
// kernels, warm-up
// iterations, a different last batch, an occasional extra token
// tolerated, and a stream with no period.
#include "analysis/repeating_sequence.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;

// Appends tokens 10 us apart, each 5 us long; `gap_before` delays the first.
class Stream {
 public:
  void Add(const std::vector<uint32_t>& symbols, uint64_t gap_before = 0) {
    now_ += gap_before;
    for (uint32_t s : symbols) {
      tokens_.push_back(SequenceToken{s, now_, now_ + 5 * kUs});
      now_ += 10 * kUs;
    }
  }
  // One token lasting `ns` (a wait, where tokens are waits).
  void AddWait(uint32_t symbol, uint64_t ns) {
    tokens_.push_back(SequenceToken{symbol, now_, now_ + ns});
    now_ += ns + 5 * kUs;
  }
  void Wait(uint64_t ns) { now_ += ns; }
  uint64_t now() const { return now_; }
  const std::vector<SequenceToken>& tokens() const { return tokens_; }

 private:
  uint64_t now_ = 1'000 * kMs;
  std::vector<SequenceToken> tokens_;
};

std::vector<uint32_t> Range(uint32_t from, uint32_t to) {
  std::vector<uint32_t> v;
  for (uint32_t s = from; s < to; ++s) v.push_back(s);
  return v;
}

size_t Steady(const PeriodResult& r) {
  size_t n = 0;
  for (const Iteration& it : r.iterations) n += it.left_out.empty();
  return n;
}

TEST(RepeatingSequenceTest, SteadyLoopCutsWhereTheJobWaits) {
  // 30 iterations of 20 kernels; the loop waits 3 ms for data before
  // kernel 7 (the anchor order starts elsewhere).
  Stream s;
  for (int i = 0; i < 30; ++i) {
    s.Add(Range(0, 7));
    s.Add(Range(7, 20), 3 * kMs);
  }
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 20u);
  EXPECT_EQ(r.cut_symbol, 7u);
  EXPECT_FALSE(r.cut_preferred);
  ASSERT_EQ(r.iterations.size(), 29u);
  EXPECT_EQ(Steady(r), 29u);
  // Contiguous, and each starts at the end of the token before the wait.
  for (size_t i = 0; i < r.iterations.size(); ++i) {
    const Iteration& it = r.iterations[i];
    EXPECT_EQ(s.tokens()[it.first_token].symbol, 7u);
    EXPECT_EQ(it.start_ns, s.tokens()[it.first_token - 1].end_ns);
    if (i > 0) EXPECT_EQ(it.start_ns, r.iterations[i - 1].end_ns);
  }
  // 20 tokens, 3 ms wait: 3.2 ms an iteration.
  EXPECT_EQ(r.iterations[3].end_ns - r.iterations[3].start_ns, 3 * kMs + 200 * kUs);
}

TEST(RepeatingSequenceTest, PreferredCutIsTheInputCopy) {
  // Symbol 12 is the host-to-device copy of the input (then 13, the
  // target's); the longest gap is elsewhere.
  Stream s;
  for (int i = 0; i < 20; ++i) {
    s.Add(Range(0, 4));
    s.Add(Range(4, 20), 2 * kMs);
  }
  std::vector<bool> preferred(20, false);
  preferred[12] = preferred[13] = true;
  PeriodResult r = FindRepeatingSequence(s.tokens(), preferred, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_TRUE(r.cut_preferred);
  EXPECT_EQ(r.cut_symbol, 12u);
}

TEST(RepeatingSequenceTest, GradientAccumulationUnitIsTheOptimizerStep) {
  // 4 micro-batches (forward 0-9, backward 10-19), then the optimizer
  // (100-104) once: 20 optimizer steps.
  Stream s;
  for (int i = 0; i < 20; ++i) {
    for (int k = 0; k < 4; ++k) s.Add(Range(0, 20), kMs);
    s.Add(Range(100, 105));
  }
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 85u);
  EXPECT_GE(r.iterations.size(), 19u);
  EXPECT_LE(r.iterations.size(), 20u);
  EXPECT_GE(Steady(r), 18u);
}

TEST(RepeatingSequenceTest, AccumulatingMicroBatchesDoNotHideTheOptimizerStep) {
  // As PyTorch traces of gradient accumulation look: 4 micro-batches, each
  // an input copy (0), kernels made once (1-9) and kernels made 2 to 15
  // times (20-33: elementwise, GEMMs, reductions), so that 15 count groups
  // outweigh the optimizer's; the first micro-batch after zero_grad()
  // assigns gradients, the others add 10 more (kernel 20 again): micro-batch
  // pieces alternate (half alike).  Then the optimizer, 6 kernels (100-105)
  // once a step, its count group light.  40 optimizer steps.  Also with
  // micro-batches all alike: their pieces then split 75% alike, a
  // micro-batch unit that must not win over the optimizer step.
  for (const bool first_assigns : {true, false}) {
    Stream s;
    for (int i = 0; i < 40; ++i) {
      for (int k = 0; k < 4; ++k) {
        s.Add({0}, kMs);
        s.Add(Range(1, 10));
        for (uint32_t j = 2; j <= 15; ++j) s.Add(std::vector<uint32_t>(j, 18 + j));
        if (k > 0 || !first_assigns) s.Add(std::vector<uint32_t>(10, 20));
      }
      s.Add(Range(100, 106));
    }
    PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
    ASSERT_TRUE(r.found) << r.why_not;
    const size_t micro = 1 + 9 + 119;
    EXPECT_EQ(r.unit_tokens, 4 * micro + (first_assigns ? 30 : 40) + 6) << first_assigns;
    EXPECT_GE(r.iterations.size(), 39u);
    EXPECT_LE(r.iterations.size(), 40u);
    EXPECT_GE(Steady(r), 38u);
  }
}

TEST(RepeatingSequenceTest, AnEpochThatHoldsTheWarmUpDoesNotOutweighTheIteration) {
  // 6 epochs of 20 iterations and 10 of a seventh, each epoch starting
  // with a shuffle (symbol 90); the first iteration also autotunes (extra
  // tokens 91-94 and 300 ms of waiting).  The epoch repeats too, and its first
  // segment counts the warm-up as steady (4 extra tokens of 400 are within
  // the tolerance), where the iteration's unit leaves that iteration out:
  // over the whole run the epoch covers more time, over the time both
  // repeat the iteration does.
  Stream s;
  for (int epoch = 0; epoch < 7; ++epoch) {
    s.Add({90}, kMs);
    for (int i = 0; i < (epoch < 6 ? 20 : 10); ++i) {
      if (epoch == 0 && i == 0) {
        s.Add({91, 92, 93, 94});
        s.Wait(300 * kMs);
      }
      s.Add(Range(0, 20), 3 * kMs);
    }
  }
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 20u);
  EXPECT_GE(Steady(r), 120u);
}

TEST(RepeatingSequenceTest, IdenticalLayersDoNotMakeTheUnit) {
  // 12 identical layers forward (0,1,2 each), backward (10,11,12 each),
  // then one optimizer kernel: a forward kernel splits most segments alike,
  // but those cover only the forward pass.
  Stream s;
  for (int i = 0; i < 25; ++i) {
    for (int l = 0; l < 12; ++l) s.Add({0, 1, 2}, l == 0 ? kMs : 0);
    for (int l = 0; l < 12; ++l) s.Add({10, 11, 12});
    s.Add({50});
  }
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 73u);
  EXPECT_EQ(r.iterations.size(), 24u);
}

TEST(RepeatingSequenceTest, EvaluationPassesAreLeftOutNotMergedIntoTheUnit) {
  // 60 training iterations (copy 0, forward 1-9, backward 10-19, optimizer
  // 20-22); after every 10th, an evaluation pass of 5 forward-only batches
  // and one accuracy reduction (30) per pass: 6 passes, so the accuracy
  // kernel alone would split the trace into 10-iteration pieces.  Each
  // evaluation batch starts with the input's copy too, so it is a window of
  // its own, left out.
  Stream s;
  for (int i = 0; i < 60; ++i) {
    s.Add(Range(0, 23), kMs);
    if (i % 10 == 9) {
      for (int b = 0; b < 5; ++b) s.Add(Range(0, 10), kMs);
      s.Add({30});
    }
  }
  std::vector<bool> preferred(31, false);
  preferred[0] = true;
  PeriodResult r = FindRepeatingSequence(s.tokens(), preferred, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 23u);
  EXPECT_EQ(r.cut_symbol, 0u);
  size_t eval_batches = 0, last_steady = 0;
  for (size_t i = 0; i < r.iterations.size(); ++i) {
    if (r.iterations[i].left_out.empty()) last_steady = i;
  }
  for (size_t i = 0; i < r.iterations.size(); ++i) {
    const Iteration& it = r.iterations[i];
    if (it.left_out.empty()) {
      EXPECT_EQ(it.tokens, 23u);
      continue;
    }
    ++eval_batches;
    EXPECT_LE(it.tokens, 11u);
    // The last pass's batches come after the last training iteration.
    EXPECT_NE(it.left_out.find(i > last_steady ? "end of the run" : "evaluation"), std::string::npos) << it.left_out;
    EXPECT_FALSE(it.warmup);
  }
  // 59 training iterations (the 60th is followed by its evaluation pass,
  // whose first batch starts the last window); the batches of the passes
  // after iterations 9, 19, ... 49, and the first 4 of the last pass's.
  EXPECT_EQ(Steady(r), 60u);
  EXPECT_EQ(eval_batches, 5u * 5u + 4u);

  // Knowing where the backward passes began (at kernel 10) changes nothing:
  // the training iteration has them, the evaluation batches do not.
  PeriodOptions with_backward;
  for (const SequenceToken& token : s.tokens()) {
    if (token.symbol == 10) with_backward.backward_starts.push_back(token.start_ns);
  }
  r = FindRepeatingSequence(s.tokens(), preferred, with_backward);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 23u);
  EXPECT_EQ(Steady(r), 60u);
}

TEST(RepeatingSequenceTest, AnRlRolloutIsPartOfTheIterationWhereBackwardPassesAreKnown) {
  // PPO: a rollout of 64 environment steps (the policy's forward pass,
  // kernels 0-5, and the action's copy back, 6), advantages (7-9), then 8
  // minibatch updates (forward 10-15, backward 16-25, optimizer 26-28),
  // 12 iterations.  The environment step splits the trace well and the
  // updates look like an evaluation pass beside it; the backward passes
  // say which is training.
  Stream s;
  std::vector<uint64_t> backward;
  for (int i = 0; i < 12; ++i) {
    for (int e = 0; e < 64; ++e) s.Add(Range(0, 7), 300 * kUs);
    s.Add(Range(7, 10));
    for (int u = 0; u < 8; ++u) {
      s.Add(Range(10, 16));
      backward.push_back(s.now());
      s.Add(Range(16, 29));
    }
  }
  PeriodOptions options;
  options.backward_starts = backward;
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 64u * 7 + 3 + 8u * 19) << "the rollout and its updates";
  EXPECT_GE(Steady(r), 10u);
  // Without them the environment step wins, as an iteration between
  // evaluation passes would: the trace alone cannot tell the two apart.
  r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 7u);
}

TEST(RepeatingSequenceTest, AMetaUpdateWithItsOwnBackwardPassIsNoAbsorbedEvaluation) {
  // First-order MAML: an iteration adapts to 4 tasks (each a forward pass,
  // kernels 0-5, and a gradient, 6-9: a backward pass), then scores the
  // queries (the same forward kernels 4 times but the first, 30, chosen
  // for a larger batch; a stack, 20) and makes the
  // meta-update (its own backward pass, the same backward kernels 4 times,
  // and Adam, 21-25); every 15 iterations an evaluation adapts to 40 tasks
  // the same way with no update.  The task's unit repeats most and its
  // irregular segments (the meta-update) hold more than a unit's extra
  // work, as an evaluation absorbed by a coarse unit would; but they hold
  // a backward pass more than its steady segments: training, not
  // evaluation, so the iteration stays the unit.
  Stream s;
  std::vector<uint64_t> backward;
  auto task = [&](uint64_t gap) {
    s.Add(Range(0, 6), gap);
    backward.push_back(s.now());
    s.Add(Range(6, 10));
  };
  for (int i = 1; i <= 60; ++i) {
    for (int t = 0; t < 4; ++t) task(t == 0 ? kMs : 100 * kUs);
    for (int q = 0; q < 4; ++q) {
      s.Add({30});  // the first layer's kernel for the queries' batch size
      s.Add(Range(1, 6));
    }
    s.Add({20});
    backward.push_back(s.now());
    for (int q = 0; q < 4; ++q) s.Add(Range(6, 10));
    s.Add(Range(21, 26));
    if (i % 15 == 0) {
      for (int t = 0; t < 40; ++t) task(100 * kUs);
    }
  }
  PeriodOptions options;
  options.backward_starts = backward;
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 4u * 10 + 4 * 6 + 1 + 4 * 4 + 5) << "the iteration: 4 tasks and the meta-update";
  EXPECT_GE(Steady(r), 50u);
}

TEST(RepeatingSequenceTest, AnEpochOfIterationsWithTheirUpdatesIsNoIteration) {
  // DDP as PyTorch's tutorial writes it: an iteration is the input's copy
  // (0), a forward pass (1-9), a backward pass (10-19) and a foreach
  // optimizer's update (20-22: multi_tensor_apply kernels); every 10
  // iterations a logged loss.item() (40-43: a copy, its waits).  After every 30 iterations
  // (an epoch) an evaluation of 3 forward-only batches (1-9 and an argmax,
  // 30, each) with 20 ms of waiting, a snapshot's copies (31, 10 of them)
  // and a barrier (32).  The epoch repeats too, absorbs the evaluation and
  // the logging, and so covers more time; the iteration's irregular
  // segments are mostly the logged ones, a few tokens longer, so only the
  // updates tell: the epoch holds 30 of them and 30 backward passes, the
  // iteration one of each.
  Stream s;
  std::vector<uint64_t> backward;
  int step = 0;
  for (int epoch = 0; epoch < 8; ++epoch) {
    for (int i = 0; i < 30; ++i) {
      s.Add(Range(0, 10), kMs);
      backward.push_back(s.now());
      s.Add(Range(10, 23));
      if (++step % 10 == 0) s.Add({40, 41, 42, 43});
    }
    for (int b = 0; b < 3; ++b) {
      s.Add(Range(1, 10), b == 0 ? 0 : 20 * kMs / 3);
      s.Add({30});
    }
    for (int c = 0; c < 10; ++c) s.Add({31});
    s.Add({32});
  }
  PeriodOptions options;
  options.backward_starts = backward;
  PeriodResult epoch_unit = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(epoch_unit.found) << epoch_unit.why_not;
  EXPECT_GT(epoch_unit.unit_tokens, 23u) << "without the updates known, the epoch (the case this rule is for)";
  options.update_symbols.assign(44, false);
  for (uint32_t k = 20; k < 23; ++k) options.update_symbols[k] = true;
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 23u) << "the iteration, with its update";
  EXPECT_GE(Steady(r), 200u);
}

TEST(RepeatingSequenceTest, AMicroBatchWithoutAnUpdateIsNoIterationWhateverTheUpdatesSize) {
  // Gradient accumulation: 4 alike micro-batches (copy 0, forward 1-5,
  // backward 10-14: zero_grad(set_to_none=False), so every one adds to the
  // gradients), then the update: 12 multi_tensor_apply launches (20-31:
  // clipping, the optimizer over many parameter groups), more than a
  // micro-batch's tokens.  The micro-batch's irregular segments hold that
  // much extra, as an evaluation absorbed by the step would; but the
  // updates are known by their kernels, and the micro-batch holds none.
  Stream s;
  std::vector<uint64_t> backward;
  for (int step = 0; step < 40; ++step) {
    for (int m = 0; m < 4; ++m) {
      s.Add(Range(0, 6), kMs);
      backward.push_back(s.now());
      s.Add(Range(10, 15));
    }
    s.Add(Range(20, 32));
  }
  PeriodOptions options;
  options.backward_starts = backward;
  PeriodResult micro = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(micro.found) << micro.why_not;
  EXPECT_EQ(micro.unit_tokens, 11u) << "without the updates known, the micro-batch (the case this rule is for)";
  options.update_symbols.assign(32, false);
  for (uint32_t k = 20; k < 32; ++k) options.update_symbols[k] = true;
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 4u * 11 + 12) << "the optimizer step: 4 micro-batches and the update";
  EXPECT_GE(Steady(r), 38u);
}

TEST(RepeatingSequenceTest, WarmUpAndLastBatchAreLeftOutWithTheReason) {
  Stream s;
  // Warm-up: the first 3 iterations also run autotuning kernels (40-47).
  for (int i = 0; i < 3; ++i) {
    s.Add(Range(0, 5), kMs);
    s.Add(Range(40, 48));
    s.Add(Range(5, 15));
  }
  for (int i = 0; i < 20; ++i) s.Add(Range(0, 15), kMs);
  // A smaller last batch: other kernel variants in the middle.
  s.Add(Range(0, 5), kMs);
  s.Add(Range(60, 70));
  s.Add({0}, kMs);  // the next iteration starts (the loop ends after it)
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 15u);
  ASSERT_EQ(r.iterations.size(), 24u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(r.iterations[i].warmup) << i;
    EXPECT_NE(r.iterations[i].left_out.find("warm-up"), std::string::npos) << r.iterations[i].left_out;
  }
  EXPECT_TRUE(r.iterations[3].left_out.empty());
  EXPECT_NE(r.iterations.back().left_out.find("end of the run"), std::string::npos) << r.iterations.back().left_out;
  EXPECT_EQ(Steady(r), 20u);
}

TEST(RepeatingSequenceTest, AnIterationBetweenTheStartUpAndTheFirstCutIsCounted) {
  // A batch-inference loop's main thread as the CPU-activity steps see it
  // (tokens are waits; the pattern of a recorded run): each iteration waits
  // 3 ms for its batch (W, the cut), blocks 5-7 more times (W), and ends
  // with two calls made once an iteration (K, L: the anchor).  The number
  // of short waits varies (13-15 tokens).  The first cut before the first
  // anchor goes back as many W as the steady unit holds, and the first
  // iteration holds one fewer: that cut lands in the start-up, and the
  // first iteration, like the steady one, was counted with the start-up
  // as one warm-up step.
  constexpr uint32_t W = 0, a = 1, b = 2, c = 3, d = 4, K = 5, L = 6, junk = 7;
  Stream s;
  auto iteration = [&](const std::vector<uint32_t>& symbols) {
    s.AddWait(W, 3 * kMs);
    s.Add(std::vector<uint32_t>(symbols.begin() + 1, symbols.end()));
  };
  const std::vector<uint32_t> steady = {W, W, W, a, b, W, W, W, W, a, c, d, K, L};
  const std::vector<uint32_t> fewer = {W, W, W, a, b, W, W, W, a, c, d, K, L};
  const std::vector<uint32_t> more = {W, W, W, W, a, b, W, W, W, W, a, c, d, K, L};
  s.Add(Range(10, 30));
  s.Add({W, a, c, junk, 11, 12, 13, junk, 13, junk, 14, 14, junk, junk, junk, junk});
  iteration(fewer);  // the first iteration
  for (int i = 0; i < 40; ++i) iteration(i % 5 == 1 ? fewer : i % 5 == 3 ? more : steady);
  s.AddWait(W, 3 * kMs);
  PeriodOptions options;
  options.tokens_are_waits = true;
  options.tolerance = 0.25;
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 14u);
  EXPECT_EQ(Steady(r), 41u) << "the first iteration is counted";
  // The start-up before it stays a warm-up step of its own.
  ASSERT_GE(r.iterations.size(), 2u);
  EXPECT_TRUE(r.iterations[0].warmup);
  EXPECT_EQ(r.iterations[0].tokens, 16u);
  EXPECT_TRUE(r.iterations[1].left_out.empty()) << r.iterations[1].left_out;
}

TEST(RepeatingSequenceTest, AWaitRecurringInTheUnitIsCutWhereTheJobWaitsLongest) {
  // A batch-inference loop's main thread as the CPU-activity steps see it
  // (tokens are waits; the pattern of an attached run on a loaded machine):
  // it blocks on the same read (W) 6-9 times an iteration, once for 3 ms
  // (the batch) and otherwise briefly, in a number that varies.  The cut is
  // that long read; counted by its rank among the reads after the anchor,
  // it fell on a short one in every iteration with another count, and most
  // iterations were left out (51 of 266 steady, 1% of the time).
  constexpr uint32_t W = 0, a = 1, b = 2, K = 3, c = 4, d = 5;
  Stream s;
  std::mt19937 rng(11);
  for (int i = 0; i < 60; ++i) {
    s.AddWait(W, 3 * kMs);                          // the batch
    for (int k = 0; k < 2 + static_cast<int>(rng() % 3); ++k) s.AddWait(W, 20 * kUs);
    s.Add({a, a, b, K, c});
    for (int k = 0; k < 3 + static_cast<int>(rng() % 2); ++k) s.AddWait(W, 20 * kUs);
    s.Add({d});
  }
  s.AddWait(W, 3 * kMs);
  PeriodOptions options;
  options.tokens_are_waits = true;
  options.tolerance = 0.25;
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.cut_symbol, W);
  // Every iteration starts at its long read.
  for (const Iteration& it : r.iterations) {
    EXPECT_EQ(s.tokens()[it.first_token].end_ns - s.tokens()[it.first_token].start_ns, 3 * kMs);
  }
  EXPECT_GE(Steady(r), 50u);
  EXPECT_GE(r.time_share, 0.8);
}

TEST(RepeatingSequenceTest, FewerWaitsInNoLessTimeAreNoLessWork) {
  // CPU activity (tokens are waits) on a noisy VM: each iteration reads its
  // batch (W, 3 ms) and blocks 6 times briefly (X); in one iteration in 4
  // the thread ran through those points instead (preempted, not blocked:
  // no token) and took longer.  Those are iterations like the others; one in
  // 10 that skips them and ends sooner (a forward-only batch) is less work.
  constexpr uint32_t W = 0, a = 1, b = 2, c = 3, X = 4, d = 5;
  Stream s;
  for (int i = 0; i < 80; ++i) {
    s.AddWait(W, 3 * kMs);
    s.Add({a, b, c});
    if (i % 4 == 1) {
      s.Wait(kMs);
    } else if (i % 10 != 4) {
      for (int k = 0; k < 6; ++k) s.AddWait(X, 50 * kUs);
    }
    s.Add({d});
  }
  s.AddWait(W, 3 * kMs);
  PeriodOptions options;
  options.tokens_are_waits = true;
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, options);
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 11u);
  size_t shorter_left_out = 0;
  for (size_t i = 1; i + 1 < r.iterations.size(); ++i) {
    const Iteration& it = r.iterations[i];
    const bool shorter = it.end_ns - it.start_ns < 3'200 * kUs;
    EXPECT_EQ(it.left_out.empty(), !shorter) << i << ": " << it.left_out;
    shorter_left_out += shorter && !it.left_out.empty();
  }
  EXPECT_GE(shorter_left_out, 6u);
}

TEST(RepeatingSequenceTest, AnOccasionalExtraTokenIsTolerated) {
  // 200-token iterations; every 5th has one extra memset (symbol 500).
  Stream s;
  for (int i = 0; i < 30; ++i) {
    s.Add(Range(0, 100), kMs);
    if (i % 5 == 2) s.Add({500});
    s.Add(Range(100, 200));
  }
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.unit_tokens, 200u);
  EXPECT_EQ(Steady(r), r.iterations.size());
}

TEST(RepeatingSequenceTest, NoPeriodInRandomWork) {
  Stream s;
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> symbol(0, 40);
  std::uniform_int_distribution<uint64_t> gap(0, 2 * kMs);
  for (int i = 0; i < 3000; ++i) s.Add({symbol(rng)}, gap(rng));
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  EXPECT_FALSE(r.found);
  EXPECT_NE(r.why_not.find("no repeating unit"), std::string::npos) << r.why_not;
  EXPECT_TRUE(r.iterations.empty());
}

TEST(RepeatingSequenceTest, PerKernelRepetitionIsNotAStep) {
  // One kernel over and over, 10 us apart: it repeats, but no unit lasts
  // long enough to be a step.
  Stream s;
  for (int i = 0; i < 1000; ++i) s.Add({3, 4});
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  EXPECT_FALSE(r.found);
  EXPECT_NE(r.why_not.find("a unit lasts"), std::string::npos) << r.why_not;
}

TEST(RepeatingSequenceTest, MillionsOfTokens) {
  // 2,000,000 launches (10,000 iterations of 200): the test is that it
  // finishes (in well under a second on a desktop) and finds them all.
  Stream s;
  for (int i = 0; i < 10'000; ++i) s.Add(Range(0, 200), kMs);
  PeriodResult r = FindRepeatingSequence(s.tokens(), {}, PeriodOptions());
  ASSERT_TRUE(r.found) << r.why_not;
  EXPECT_EQ(r.iterations.size(), 9'999u);
  EXPECT_EQ(Steady(r), 9'999u);
}

}  // namespace
}  // namespace gpuos
