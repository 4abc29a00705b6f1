// FindAccumulationPeriod on constructed series of the CPU time between
// consecutive backward passes: gradient accumulation with k = 2, 3, 4 and 8
// (jittered, evaluation passes every few optimizer steps, a slow first
// interval), no accumulation (jittered, and with a rare extra), random
// work, too few intervals, two periods that do not divide each other, and
// where the updates are (UpdateIntervals): by their length where they stand
// clear (MAML's evaluations adapt with no update), else by position; and
// micro-batches counted per epoch, whose phase moves at each epoch's end.
// (A loop without accumulation that does extra CPU work every k-th
// iteration, such as expensive logging, looks the same as accumulation of
// k: the header says so.)
#include "analysis/accumulation_period.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint64_t kMs = 1'000'000;

// `optimizer_steps` groups of k micro-batches of about 7 ms each (jitter
// +-`jitter` of it), the interval after the k-th also running the update
// (`update` more) and, after every `eval_every`-th optimizer step, an
// evaluation pass of 30 ms.  The first interval is slow (warm-up).
std::vector<uint64_t> Accumulation(uint32_t k, size_t optimizer_steps, uint64_t update, size_t eval_every,
                                   double jitter, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(1 - jitter, 1 + jitter);
  std::vector<uint64_t> w;
  for (size_t s = 1; s <= optimizer_steps; ++s) {
    for (uint32_t m = 0; m < k; ++m) {
      double ns = 7.0 * kMs * noise(rng);
      if (m + 1 == k) ns += static_cast<double>(update);
      if (m + 1 == k && eval_every > 0 && s % eval_every == 0) ns += 30.0 * kMs;
      w.push_back(static_cast<uint64_t>(ns));
    }
  }
  w[0] += 40 * kMs;
  return w;
}

TEST(AccumulationPeriodTest, FindsKWithItsPhaseDespiteJitterAndEvaluation) {
  for (uint32_t k : {2u, 3u, 4u, 8u}) {
    // Enough optimizer steps to tell (a 3 s attach window of a fast loop).
    const size_t steps = k == 2 ? 60 : 40;
    const std::vector<uint64_t> w = Accumulation(k, steps, 2 * kMs, 10, 0.08, k);
    const AccumulationPeriod p = FindAccumulationPeriod(w);
    ASSERT_TRUE(p.found) << k << ": " << p.evidence;
    EXPECT_FALSE(p.ambiguous);
    EXPECT_EQ(p.k, k);
    EXPECT_EQ(p.phase, k - 1) << p.evidence;  // the interval after the k-th backward pass
    EXPECT_GE(p.wins, p.groups * 9 / 10) << p.evidence;
    EXPECT_GT(p.ratio, 1.2);
    EXPECT_NE(p.evidence.find("ran longer than the"), std::string::npos);
  }
}

TEST(AccumulationPeriodTest, TheGroupsCanStartAnywhere) {
  // The trace starts in the middle of an optimizer step (attached).
  std::vector<uint64_t> w = Accumulation(3, 40, 2 * kMs, 0, 0.05, 7);
  w.erase(w.begin());  // now the update follows intervals 1, 4, 7...
  const AccumulationPeriod p = FindAccumulationPeriod(w);
  ASSERT_TRUE(p.found) << p.evidence;
  EXPECT_EQ(p.k, 3u);
  EXPECT_EQ(p.phase, 1u);
}

// Micro-batches counted per epoch (`(i + 1) % k == 0` over
// enumerate(loader)), `epochs` epochs of `batches` each: with
// `step_at_end` the epoch's last group is shorter (Lightning steps there),
// without it its micro-batches go into the next epoch's first step.
// `updates` gets the intervals that hold an update, `epoch_starts` those
// in which the next epoch starts (its DataLoader forks its workers after
// the epoch's last backward pass).
std::vector<uint64_t> EpochAccumulation(uint32_t k, size_t batches, size_t epochs, bool step_at_end, uint32_t seed,
                                        std::vector<size_t>& updates, std::vector<bool>& epoch_starts) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(0.92, 1.08);
  std::vector<uint64_t> w;
  for (size_t e = 0; e < epochs; ++e) {
    for (size_t i = 0; i < batches; ++i) {
      double ns = 7.0 * kMs * noise(rng);
      if ((i + 1) % k == 0 || (step_at_end && i + 1 == batches)) {
        ns += 1.5 * kMs;
        updates.push_back(w.size());
      }
      w.push_back(static_cast<uint64_t>(ns));
      epoch_starts.push_back(i + 1 == batches && e + 1 < epochs);
    }
  }
  return w;
}

TEST(AccumulationPeriodTest, APhaseThatMovesAtEachEpochsEndIsFollowed) {
  for (const bool step_at_end : {true, false}) {
    for (const uint32_t k : {2u, 3u, 4u, 6u}) {
      std::vector<size_t> want;
      std::vector<bool> epoch_starts;
      const std::vector<uint64_t> w =
          EpochAccumulation(k, 10 * k + (k < 4 ? 1 : 2), 4, step_at_end, k, want, epoch_starts);
      const AccumulationPeriod fixed = FindAccumulationPeriod(w);
      EXPECT_FALSE(fixed.found && fixed.k == k) << "no epoch starts known: " << fixed.evidence;
      const AccumulationPeriod p = FindAccumulationPeriod(w, epoch_starts);
      // k=4 and 6 with 2 batches left at each epoch's end: the phase of k/2
      // stays, and only the chain tells k.
      ASSERT_TRUE(p.found) << k << " " << step_at_end << ": " << p.evidence;
      EXPECT_EQ(p.k, k) << p.evidence;
      EXPECT_EQ(p.phase_changes, 3u) << p.evidence;
      EXPECT_NE(p.evidence.find("phase changing 3 times"), std::string::npos) << p.evidence;
      const std::vector<size_t> got = UpdateIntervals(w, p);
      // The last update may be cut off with the trace's end.
      ASSERT_GE(got.size() + 1, want.size());
      ASSERT_LE(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << k << " " << step_at_end << " " << i;
    }
  }
}

TEST(AccumulationPeriodTest, WorkWhosePhaseDriftsIsNoPeriod) {
  // No accumulation; Python's garbage collector runs every 700 allocations,
  // about every fourth iteration, its phase drifting.  Without an epoch's
  // start where the phase changes, no chain follows it; and the epoch
  // starts of a DataLoader do not make the drift a period either.
  std::mt19937 rng(41);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  std::vector<uint64_t> w;
  std::vector<bool> epoch_starts;
  double allocations = 0;
  for (int j = 0; j < 1000; ++j) {
    double ns = 1.0 * kMs * noise(rng);
    allocations += 170 + rng() % 20;
    if (allocations >= 700) ns += 0.12 * kMs, allocations -= 700;
    w.push_back(static_cast<uint64_t>(ns));
    epoch_starts.push_back(j % 312 == 311);
  }
  const AccumulationPeriod p = FindAccumulationPeriod(w);
  EXPECT_FALSE(p.found) << p.evidence;
  EXPECT_EQ(p.phase_changes, 0u);
  const AccumulationPeriod with_epochs = FindAccumulationPeriod(w, epoch_starts);
  EXPECT_FALSE(with_epochs.found) << with_epochs.evidence;
}

TEST(AccumulationPeriodTest, AFixedPhaseNeedsNoChain) {
  const AccumulationPeriod p = FindAccumulationPeriod(Accumulation(3, 60, 2 * kMs, 0, 0.08, 31));
  ASSERT_TRUE(p.found) << p.evidence;
  EXPECT_EQ(p.phase_changes, 0u);
  EXPECT_TRUE(p.updates.empty());
}

TEST(AccumulationPeriodTest, NoAccumulationIsNoPeriod) {
  // One backward pass an optimizer step, jittered, an evaluation pass
  // every 10 and a few extras at random (a garbage collection): no k
  // qualifies.
  std::vector<uint64_t> w = Accumulation(1, 130, 2 * kMs, 10, 0.1, 3);
  std::mt19937 rng(4);
  for (int i = 0; i < 8; ++i) w[rng() % w.size()] += 5 * kMs;
  const AccumulationPeriod p = FindAccumulationPeriod(w);
  EXPECT_FALSE(p.found) << p.evidence;
  EXPECT_FALSE(p.ambiguous);
  EXPECT_NE(p.evidence.find("no k from 2 to 8"), std::string::npos) << p.evidence;
}

TEST(AccumulationPeriodTest, IrregularWorkIsNoPeriod) {
  // Neither with a fixed phase nor as a chain whose phase moves.
  std::mt19937 rng(13);
  std::uniform_int_distribution<uint64_t> work(2 * kMs, 20 * kMs);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint64_t> w;
    for (int j = 0; j < 200; ++j) w.push_back(work(rng));
    const AccumulationPeriod p = FindAccumulationPeriod(w);
    EXPECT_FALSE(p.found) << trial << ": " << p.evidence;
  }
}

TEST(AccumulationPeriodTest, AnUpdateLostInTheNoiseIsNoPeriod) {
  // An update of 1% of a micro-batch under 10% jitter: not told apart.
  const AccumulationPeriod p = FindAccumulationPeriod(Accumulation(3, 40, kMs / 14, 0, 0.1, 5));
  EXPECT_FALSE(p.found) << p.evidence;
}

TEST(AccumulationPeriodTest, TooFewGroupsAreNotEnoughEvidence) {
  // 4 optimizer steps of 2: chance could do as well.
  const AccumulationPeriod p = FindAccumulationPeriod(Accumulation(2, 4, 3 * kMs, 0, 0.02, 9));
  EXPECT_FALSE(p.found) << p.evidence;
  EXPECT_FALSE(FindAccumulationPeriod({}).found);
  EXPECT_FALSE(FindAccumulationPeriod({kMs, 2 * kMs, kMs}).found);
}

TEST(AccumulationPeriodTest, AFewLuckyWinsAmongManyPeriodsAreNotEnough) {
  // A hand-written update, one backward pass a step, 58 of them: 5 of the
  // 7 groups of 7 at one phase happen to end with a slightly longer
  // interval.  By itself that is a 1-in-1000 chance, but 35 (k, phase)
  // pairs were tried.
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> noise(0.98, 1.02);
  std::vector<uint64_t> w;
  for (int j = 0; j < 57; ++j) {
    const bool lucky = j % 7 == 3 && j / 7 >= 1 && j / 7 <= 5;
    w.push_back(static_cast<uint64_t>((lucky ? 9.2 : 8.6) * static_cast<double>(kMs) * noise(rng)));
  }
  const AccumulationPeriod p = FindAccumulationPeriod(w);
  EXPECT_FALSE(p.found) << p.evidence;
}

TEST(AccumulationPeriodTest, TwoPeriodsThatDoNotDivideEachOtherAreAmbiguous) {
  // Every other interval is busier than the one before it, and every third
  // than the two before it: k=2 and k=3 both fit.
  const std::vector<uint64_t> cycle = {10, 11, 12, 13, 10, 14};
  std::vector<uint64_t> w;
  for (int i = 0; i < 30; ++i) {
    for (uint64_t x : cycle) w.push_back(x * kMs);
  }
  const AccumulationPeriod p = FindAccumulationPeriod(w);
  EXPECT_FALSE(p.found);
  EXPECT_TRUE(p.ambiguous);
  EXPECT_NE(p.evidence.find("but also"), std::string::npos) << p.evidence;
}

TEST(AccumulationPeriodTest, ClearUpdatesAreFoundWhereTheyAreNotOnlyAtThePhase) {
  // MAML: 4 adaptation gradients (5 ms apart) and the meta-update's
  // interval (25 ms) an iteration; after every 10th iteration an evaluation
  // adapts with 20 gradients of 2 ms and no update (a multiple of 5, so the
  // phase holds and the period is found).  The updates are the long
  // intervals, and none falls inside an evaluation.
  std::vector<uint64_t> w;
  std::vector<size_t> expected;
  for (int it = 1; it <= 40; ++it) {
    for (int g = 0; g < 4; ++g) w.push_back(5 * kMs + g * 10'000);
    expected.push_back(w.size());
    w.push_back(25 * kMs);
    if (it % 10 == 0) {
      for (int e = 0; e < 20; ++e) w.push_back(2 * kMs + e * 10'000);
    }
  }
  const AccumulationPeriod p = FindAccumulationPeriod(w);
  ASSERT_TRUE(p.found) << p.evidence;
  EXPECT_EQ(p.k, 5u);
  EXPECT_EQ(UpdateIntervals(w, p), expected);

  // A slow first interval (warm-up) and one noisy interval inside a group
  // reach the threshold too: neither closes a whole group at the phase, so
  // neither cuts one.
  std::vector<uint64_t> noisy = w;
  noisy[0] += 40 * kMs;
  noisy[expected[20] - 2] += 30 * kMs;
  const AccumulationPeriod n = FindAccumulationPeriod(noisy);
  ASSERT_TRUE(n.found) << n.evidence;
  EXPECT_EQ(UpdateIntervals(noisy, n), expected);

  // An update that hardly stands out is found by its position: every k-th
  // interval at the phase.
  std::vector<uint64_t> close = Accumulation(3, 40, 2 * kMs, 0, 0.05, 3);
  const AccumulationPeriod q = FindAccumulationPeriod(close);
  ASSERT_TRUE(q.found) << q.evidence;
  ASSERT_LT(q.update_median_ns, kClearUpdateRatio * q.other_median_ns);
  const std::vector<size_t> updates = UpdateIntervals(close, q);
  ASSERT_EQ(updates.size(), 40u);
  for (size_t i = 0; i < updates.size(); ++i) EXPECT_EQ(updates[i], q.phase + 3 * i);
}

TEST(AccumulationPeriodTest, ASmallUpdateUnderHeavyJitterIsFound) {
  // ddp_tutorial on a noisy 2-CPU VM: SGD's update is 8% of a micro-batch
  // under +-12% jitter, so it wins about 3 groups in 4.
  const AccumulationPeriod p = FindAccumulationPeriod(Accumulation(2, 120, 56 * kMs / 100, 0, 0.12, 11));
  ASSERT_TRUE(p.found) << p.evidence;
  EXPECT_EQ(p.k, 2u);
  EXPECT_EQ(p.phase, 1u);
  EXPECT_LT(p.wins, p.groups * 85 / 100) << p.evidence;
}

TEST(AccumulationPeriodTest, NoiseInsideGroupsAndEvaluationsOfAnyLengthKeepTheUpdates) {
  // MAML on a noisy VM: 4 adaptation gradients of 5 ms and the meta-update
  // of 26 ms an iteration; in one iteration in 5, two adaptation intervals
  // run 13 ms (as slow as the threshold); after every 10th iteration an
  // evaluation adapts with `eval_passes` gradients of 1.4 ms and no update.
  const auto maml = [](int eval_passes, std::vector<size_t>& expected) {
    std::vector<uint64_t> w;
    for (int it = 1; it <= 60; ++it) {
      for (int g = 0; g < 4; ++g) w.push_back((it % 5 == 2 && g >= 2 ? 13 : 5) * kMs + g * 10'000);
      expected.push_back(w.size());
      w.push_back(26 * kMs);
      if (it % 10 == 0) {
        for (int e = 0; e < eval_passes; ++e) w.push_back((e % 5 == 4 ? 4 : 1) * kMs + 400'000);
      }
    }
    return w;
  };
  std::vector<size_t> expected;
  const std::vector<uint64_t> w = maml(20, expected);
  const AccumulationPeriod p = FindAccumulationPeriod(w);
  ASSERT_TRUE(p.found) << p.evidence;
  EXPECT_EQ(p.k, 5u);
  EXPECT_EQ(UpdateIntervals(w, p), expected);

  // 23 gradients an evaluation move the phase: the period is found before
  // the first (a trace that ends there), and the updates after each
  // evaluation are found all the same.
  std::vector<size_t> moved;
  const std::vector<uint64_t> m = maml(23, moved);
  const AccumulationPeriod q = FindAccumulationPeriod(std::vector<uint64_t>(m.begin(), m.begin() + 50));
  ASSERT_TRUE(q.found) << q.evidence;
  EXPECT_EQ(UpdateIntervals(m, q), moved);
}

}  // namespace
}  // namespace gpuos
