// The folds of periodic_extra_work.h on constructed steps: a rollout left
// out before every k updates, the updates left out between a rollout's
// environment steps, and a generator's update after every k critic updates
// make one iteration of k steps; an evaluation every N steps, a series
// off its period, or one with data fetches of its own changes nothing.
#include "analysis/periodic_extra_work.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint64_t kMs = 1'000'000;

// Steps between optimizer marks of `update_ms`; every `period`-th (from
// `first`) also holds `extra_ms` of work and is marked left out as
// MarkExtraWorkSteps leaves such steps out.
std::vector<StepWindow> PeriodicSteps(size_t n, size_t period, size_t first, uint64_t update_ms, uint64_t extra_ms) {
  std::vector<StepWindow> steps;
  uint64_t now = 1'000 * kMs;
  for (size_t i = 0; i < n; ++i) {
    StepWindow w;
    w.index = i + 1;
    w.start_ns = now;
    const bool extra = i >= first && (i - first) % period == 0;
    now += (update_ms + (extra ? extra_ms : 0)) * kMs;
    w.end_ns = now;
    if (extra) {
      w.warmup = true;
      w.left_out = "extra CPU work";
    }
    steps.push_back(w);
  }
  return steps;
}

TEST(PeriodicExtraWorkTest, ARolloutBeforeEveryKUpdatesIsPartOfTheIteration) {
  // PPO: the first rollout ran before the first mark, so the first 15
  // updates make a partial iteration; then 5 of rollout (40 ms) + 16
  // updates (3 ms).
  std::vector<StepWindow> steps = PeriodicSteps(15 + 5 * 16, 16, 15, 3, 40);
  steps[0].warmup = true;
  const PeriodicFold fold = FoldPeriodicExtraWork(steps, std::vector<bool>(steps.size(), false));
  EXPECT_EQ(fold.period, 16u);
  EXPECT_EQ(fold.occurrences, 5u);
  EXPECT_NEAR(fold.share, 5.0 * 43 / (5 * (40 + 16 * 3)), 1e-9);
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_TRUE(steps[0].warmup);
  EXPECT_NE(steps[0].left_out.find("before the first mark"), std::string::npos);
  EXPECT_EQ(steps[0].end_ns - steps[0].start_ns, 15 * 3 * kMs);
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].end_ns - steps[i].start_ns, (40 + 16 * 3) * kMs) << i;
    EXPECT_FALSE(steps[i].warmup) << i;
    EXPECT_TRUE(steps[i].left_out.empty()) << i;
    EXPECT_EQ(steps[i].index, i);
    EXPECT_EQ(steps[i].start_ns, steps[i - 1].end_ns) << "contiguous";
  }

  // A job that ends inside an iteration: its last one is left out.
  steps = PeriodicSteps(5 * 16 - 4, 16, 0, 3, 40);
  ASSERT_EQ(FoldPeriodicExtraWork(steps, std::vector<bool>(steps.size(), false)).period, 16u);
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_TRUE(steps.back().warmup);
  EXPECT_NE(steps.back().left_out.find("12 of its 16"), std::string::npos) << steps.back().left_out;
}

TEST(PeriodicExtraWorkTest, AnEvaluationEveryNStepsStaysLeftOut) {
  const std::vector<bool> no_fetch(60, false);
  // A small part of the run (25 ms every 10 steps of 10 ms: 20%).
  std::vector<StepWindow> steps = PeriodicSteps(60, 10, 9, 10, 25);
  EXPECT_EQ(FoldPeriodicExtraWork(steps, no_fetch).period, 0u);
  EXPECT_EQ(steps.size(), 60u);
  // A large part, but the evaluation reads its own data.
  steps = PeriodicSteps(60, 10, 9, 10, 100);
  std::vector<bool> fetches = no_fetch;
  for (size_t i = 9; i < 60; i += 10) fetches[i] = true;
  EXPECT_EQ(FoldPeriodicExtraWork(steps, fetches).period, 0u);
  EXPECT_EQ(steps.size(), 60u);
  // Not at one period (an evaluation, then a checkpoint off the beat).
  steps = PeriodicSteps(60, 10, 9, 10, 100);
  steps[25].left_out = "extra CPU work";
  EXPECT_EQ(FoldPeriodicExtraWork(steps, no_fetch).period, 0u);
  // Only twice, or stopping long before the end (a phase, not the loop).
  steps = PeriodicSteps(25, 10, 9, 10, 100);
  EXPECT_EQ(FoldPeriodicExtraWork(steps, std::vector<bool>(25, false)).period, 0u);
  steps = PeriodicSteps(60, 10, 9, 10, 100);
  steps[49].left_out.clear();
  steps[59].left_out.clear();
  EXPECT_EQ(FoldPeriodicExtraWork(steps, no_fetch).period, 0u);
  EXPECT_EQ(steps.size(), 60u);
}

TEST(PeriodicExtraWorkTest, UpdatesBetweenRolloutsOfARepeatedEnvironmentStepMakeTheIteration) {
  // The kernel sequence's unit is the environment step (3 ms, no backward
  // pass); every 32nd step is the updates (left out, 8 backward passes).
  std::vector<StepWindow> steps = PeriodicSteps(20 + 4 * 32, 32, 20, 3, 40);
  std::vector<uint64_t> backward;
  for (const StepWindow& w : steps) {
    if (w.left_out.empty()) continue;
    for (int b = 0; b < 8; ++b) backward.push_back(w.start_ns + (b * 5 + 1) * kMs);
  }
  std::vector<StepWindow> folded = steps;
  const PeriodicFold fold = FoldAroundTrainingSteps(folded, backward);
  EXPECT_EQ(fold.period, 32u);
  EXPECT_EQ(fold.occurrences, 4u);
  ASSERT_EQ(folded.size(), 5u);
  EXPECT_TRUE(folded[0].warmup);
  for (size_t i = 1; i < folded.size(); ++i) {
    EXPECT_TRUE(folded[i].left_out.empty()) << i;
    EXPECT_EQ(folded[i].end_ns - folded[i].start_ns, (40 + 32 * 3) * kMs) << i;
  }
  // An evaluation pass every 32 steps: the backward passes are in the
  // steady steps, so nothing changes.
  backward.clear();
  for (const StepWindow& w : steps) {
    if (w.left_out.empty()) backward.push_back(w.start_ns + kMs);
  }
  folded = steps;
  EXPECT_EQ(FoldAroundTrainingSteps(folded, backward).period, 0u);
  EXPECT_EQ(folded.size(), steps.size());
  // Nothing known about backward passes: nothing changes.
  EXPECT_EQ(FoldAroundTrainingSteps(folded, {}).period, 0u);
}

TEST(PeriodicExtraWorkTest, AnUpdateEveryKUnitsWithItsOwnBackwardPassMakesTheIteration) {
  // WGAN-GP: the kernel sequence's unit is a critic update (20 ms, two
  // backward passes: the gradient penalty's torch.autograd.grad and the
  // loss's); every 5th also holds the generator's update (one more
  // backward pass, 6 ms more), so it is left out as extra work; so is the
  // warm-up, step 0.
  std::vector<StepWindow> steps = PeriodicSteps(4 + 5 * 30, 5, 4, 20, 6);
  steps[0].warmup = true;
  steps[0].left_out = "warm-up";
  std::vector<uint64_t> backward;
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t passes = i == 0 ? 4 : steps[i].left_out.empty() ? 2 : 3;
    for (size_t b = 0; b < passes; ++b) backward.push_back(steps[i].start_ns + (b * 5 + 1) * kMs);
  }
  std::vector<StepWindow> folded = steps;
  const PeriodicFold fold = FoldExtraTrainingSteps(folded, backward);
  EXPECT_EQ(fold.period, 5u);
  EXPECT_EQ(fold.occurrences, 30u);
  // The head (steps 0-4) left out; 29 whole iterations, each ending with
  // the generator's update; the 4 critic updates after the last one are an
  // iteration the job ended inside.
  ASSERT_EQ(folded.size(), 31u);
  EXPECT_TRUE(folded[0].warmup);
  EXPECT_NE(folded[30].left_out.find("ended inside"), std::string::npos) << folded[30].left_out;
  for (size_t i = 1; i < 30; ++i) {
    EXPECT_TRUE(folded[i].left_out.empty()) << i << ": " << folded[i].left_out;
    EXPECT_EQ(folded[i].end_ns - folded[i].start_ns, (5 * 20 + 6) * kMs) << i;
  }
  // An evaluation pass every 5 steps adds no backward pass: nothing changes.
  backward.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t b = 0; b < 2; ++b) backward.push_back(steps[i].start_ns + (b * 5 + 1) * kMs);
  }
  folded = steps;
  EXPECT_EQ(FoldExtraTrainingSteps(folded, backward).period, 0u);
  EXPECT_EQ(folded.size(), steps.size());
  EXPECT_EQ(FoldExtraTrainingSteps(folded, {}).period, 0u);

  // MAML: an evaluation every 5 steps adapts to its tasks with 40
  // torch.autograd.grad calls and no update of its own: far more backward
  // passes than another update makes; it stays left out, nothing folded.
  backward.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t passes = steps[i].left_out.empty() || i == 0 ? 2 : 2 + 40;
    for (size_t b = 0; b < passes; ++b) backward.push_back(steps[i].start_ns + (b * 100 + 1) * 1'000);
  }
  folded = steps;
  EXPECT_EQ(FoldExtraTrainingSteps(folded, backward).period, 0u);
  ASSERT_EQ(folded.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(folded[i].left_out, steps[i].left_out) << i;
}

}  // namespace
}  // namespace gpuos
