// Which optimizer steps end a training step (cupti_shim/optimizer_step_cycle.h),
// fed the optimizer numbers of the Python hook's ranges in the order the
// loops of real scripts return from them.
#include "optimizer_step_cycle.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos_capture {
namespace {

// The returns that end a step, as the report takes them: a move back
// replaces the provisional boundaries.
std::vector<size_t> Boundaries(const std::vector<uint32_t>& returns, OptimizerStepCycle* cycle_out = nullptr) {
  OptimizerStepCycle cycle;
  std::vector<size_t> boundaries;
  for (size_t i = 0; i < returns.size(); ++i) {
    const OptimizerStepCycle::Outcome o = cycle.Add(returns[i]);
    EXPECT_TRUE(o.began_at < 0 || o.ends_step) << "return " << i;
    if (o.began_at >= 0) boundaries.assign(1, static_cast<size_t>(o.began_at));
    std::vector<size_t> earlier;
    for (size_t j = i; j-- > 0 && earlier.size() < o.earlier_boundaries;) {
      if (returns[j] == returns[i]) earlier.insert(earlier.begin(), j);
    }
    EXPECT_EQ(earlier.size(), o.earlier_boundaries) << "return " << i;
    EXPECT_TRUE(boundaries.empty() || earlier.empty() || earlier.front() > boundaries.back()) << "return " << i;
    boundaries.insert(boundaries.end(), earlier.begin(), earlier.end());
    if (o.ends_step) boundaries.push_back(i);
  }
  if (cycle_out != nullptr) *cycle_out = cycle;
  return boundaries;
}

std::vector<uint32_t> Repeat(const std::vector<uint32_t>& cycle, int times) {
  std::vector<uint32_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), cycle.begin(), cycle.end());
  return out;
}

TEST(OptimizerNumber, ReadsTheHooksNamesAndNothingElse) {
  EXPECT_EQ(OptimizerNumber("optimizer.step"), 1u);
  EXPECT_EQ(OptimizerNumber("optimizer.step#2"), 2u);
  EXPECT_EQ(OptimizerNumber("optimizer.step#17"), 17u);
  EXPECT_EQ(OptimizerNumber("optimizer.step#1"), 0u);  // the first has no number
  EXPECT_EQ(OptimizerNumber("optimizer.step#0"), 0u);
  EXPECT_EQ(OptimizerNumber("optimizer.step#02"), 0u);
  EXPECT_EQ(OptimizerNumber("optimizer.step#"), 0u);
  EXPECT_EQ(OptimizerNumber("optimizer.step#2x"), 0u);
  EXPECT_EQ(OptimizerNumber("optimizer.steps"), 0u);
  EXPECT_EQ(OptimizerNumber("optimizer.step#99999999999"), 0u);
  EXPECT_EQ(OptimizerNumber("optimizer.ste"), 0u);
  EXPECT_EQ(OptimizerNumber(""), 0u);
  EXPECT_EQ(OptimizerNumber("update#3", "update"), 3u);
}

TEST(OptimizerStepCycle, OneOptimizerEndsAStepAtEveryReturn) {
  OptimizerStepCycle cycle;
  EXPECT_EQ(Boundaries(Repeat({1}, 6), &cycle), (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(cycle.boundary(), 1u);
  EXPECT_EQ(cycle.optimizers_seen(), 1u);
}

TEST(OptimizerStepCycle, AGansTwoOptimizersMakeOneStepAnIterationClosedByTheSecond) {
  // DCGAN: optimizerD.step(), optimizerG.step() every batch.
  OptimizerStepCycle cycle;
  EXPECT_EQ(Boundaries(Repeat({1, 2}, 5), &cycle), (std::vector<size_t>{1, 3, 5, 7, 9}));
  EXPECT_EQ(cycle.boundary(), 2u);
  EXPECT_EQ(cycle.optimizers_seen(), 2u);
  // Three (an encoder's, a decoder's and a head's): the last closes it.
  EXPECT_EQ(Boundaries(Repeat({1, 2, 3}, 3)), (std::vector<size_t>{2, 5, 8}));
}

TEST(OptimizerStepCycle, ACriticUpdatedFiveTimesAGeneratorUpdateMakesOneStep) {
  // WGAN: n_critic = 5 discriminator updates, then the generator's; an
  // occasional sixth critic update does not move the boundary.
  std::vector<uint32_t> returns = Repeat({1, 1, 1, 1, 1, 2}, 4);
  returns.insert(returns.end(), {1, 1, 1, 1, 1, 1, 2});
  OptimizerStepCycle cycle;
  EXPECT_EQ(Boundaries(returns, &cycle), (std::vector<size_t>{5, 11, 17, 23, 30}));
  EXPECT_EQ(cycle.boundary(), 2u);
  // The generator also stepping after the first batch (`if i % n_critic ==
  // 0`, as PyTorch-GAN's WGAN writes it): D, G, then D x5, G.
  returns = {1, 2};
  const std::vector<uint32_t> rest = Repeat({1, 1, 1, 1, 1, 2}, 6);
  returns.insert(returns.end(), rest.begin(), rest.end());
  EXPECT_EQ(Boundaries(returns, &cycle), (std::vector<size_t>{1, 7, 13, 19, 25, 31, 37}));
  EXPECT_EQ(cycle.boundary(), 2u);
  // A hundred critic updates per generator update at first (the original
  // WGAN's), then five.
  returns = Repeat({1}, 100);
  returns.push_back(2);
  for (int i = 0; i < 3; ++i) {
    const std::vector<uint32_t> more = Repeat({1}, i == 0 ? 100 : 5);
    returns.insert(returns.end(), more.begin(), more.end());
    returns.push_back(2);
  }
  EXPECT_EQ(Boundaries(returns, &cycle), (std::vector<size_t>{100, 201, 207, 213}));
  EXPECT_EQ(cycle.boundary(), 2u);
}

TEST(OptimizerStepCycle, TheOnlineCountLearnsTheCycleWhenItsLastOptimizerReturns) {
  OptimizerStepCycle cycle;
  EXPECT_TRUE(cycle.Add(1).ends_step);  // provisional: nothing else has stepped yet
  const OptimizerStepCycle::Outcome g1 = cycle.Add(2);
  EXPECT_FALSE(g1.ends_step);
  EXPECT_EQ(g1.began_at, -1);
  EXPECT_TRUE(cycle.Add(1).ends_step);  // still provisional
  const OptimizerStepCycle::Outcome g2 = cycle.Add(2);
  EXPECT_TRUE(g2.ends_step);
  EXPECT_EQ(g2.began_at, 1);  // step 1 ran from the generator's first return to this one
  EXPECT_FALSE(cycle.Add(1).ends_step);
  EXPECT_TRUE(cycle.Add(2).ends_step);
}

TEST(OptimizerStepCycle, AnOptimizerThatStepsOnceChangesNothing) {
  // A one-off step of a second optimizer (a calibration) in a long run.
  std::vector<uint32_t> returns = Repeat({1}, 50);
  returns.push_back(2);
  const std::vector<uint32_t> more = Repeat({1}, 50);
  returns.insert(returns.end(), more.begin(), more.end());
  OptimizerStepCycle cycle;
  const std::vector<size_t> b = Boundaries(returns, &cycle);
  EXPECT_EQ(b.size(), 100u);
  EXPECT_EQ(cycle.boundary(), 1u);
}

TEST(OptimizerStepCycle, AnOptimizerThatTakesOverFromOneStillAliveBecomesTheBoundary) {
  // Pre-training with one optimizer, fine-tuning with a second while the
  // first is still referenced: the second's second return takes over, and
  // its first ends a step too.
  std::vector<uint32_t> returns = Repeat({1}, 4);
  const std::vector<uint32_t> then = Repeat({2}, 4);
  returns.insert(returns.end(), then.begin(), then.end());
  EXPECT_EQ(Boundaries(returns), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  // After a GAN's cycle was learned (3 returns the longest, counting the
  // learning one): once the boundary has been silent for more than 4 of
  // them; each of the new optimizer's returns since ends a step.
  returns = Repeat({1, 2}, 3);
  const std::vector<uint32_t> third = Repeat({3}, 16);
  returns.insert(returns.end(), third.begin(), third.end());
  std::vector<size_t> expected = {1, 3, 5};
  for (size_t i = 6; i < 22; ++i) expected.push_back(i);
  EXPECT_EQ(Boundaries(returns), expected);
  // Cross-validation folds, each with a new optimizer while the last one
  // is still alive (the hook's numbers 1, 2, then 1 again once the first
  // was collected): every return ends a step.
  returns = Repeat({1}, 30);
  for (uint32_t fold : {2u, 1u, 2u}) {
    const std::vector<uint32_t> next = Repeat({fold}, 30);
    returns.insert(returns.end(), next.begin(), next.end());
  }
  EXPECT_EQ(Boundaries(returns).size(), returns.size());
}

TEST(OptimizerStepCycle, ManyOptimizersAreBoundedNotLost) {
  OptimizerStepCycle cycle;
  for (uint32_t i = 1; i <= 200; ++i) cycle.Add(i);
  EXPECT_EQ(cycle.optimizers_seen(), 64u);
  // Still counting: the last one, stepping alone, takes over.
  EXPECT_TRUE(cycle.Add(200).ends_step);
  EXPECT_EQ(cycle.boundary(), 200u);
  EXPECT_TRUE(cycle.Add(200).ends_step);
}

}  // namespace
}  // namespace gpuos_capture
