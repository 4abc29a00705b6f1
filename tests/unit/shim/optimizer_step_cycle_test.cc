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
    EXPECT_FALSE(o.ends_step && o.began_at >= 0) << "return " << i;
    if (o.began_at >= 0) boundaries.assign(1, static_cast<size_t>(o.began_at));
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
}

TEST(OptimizerStepCycle, TheOnlineCountMovesStepOneBackOnceTheCycleIsKnown) {
  OptimizerStepCycle cycle;
  EXPECT_TRUE(cycle.Add(1).ends_step);  // provisional: nothing else has stepped yet
  const OptimizerStepCycle::Outcome g1 = cycle.Add(2);
  EXPECT_FALSE(g1.ends_step);
  EXPECT_EQ(g1.began_at, -1);
  const OptimizerStepCycle::Outcome d2 = cycle.Add(1);
  EXPECT_FALSE(d2.ends_step);
  EXPECT_EQ(d2.began_at, 1);  // step 1 began at the generator's first return
  EXPECT_TRUE(cycle.Add(2).ends_step);
  EXPECT_FALSE(cycle.Add(1).ends_step);
}

TEST(OptimizerStepCycle, AnOptimizerThatTakesOverFromOneStillAliveBecomesTheBoundary) {
  // Pre-training with one optimizer, fine-tuning with a second while the
  // first is still referenced: the second's second return takes over.
  std::vector<uint32_t> returns = Repeat({1}, 4);
  const std::vector<uint32_t> then = Repeat({2}, 4);
  returns.insert(returns.end(), then.begin(), then.end());
  EXPECT_EQ(Boundaries(returns), (std::vector<size_t>{0, 1, 2, 3, 5, 6, 7}));
  // And after a GAN's cycle was learned.
  returns = Repeat({1, 2}, 3);
  const std::vector<uint32_t> third = Repeat({3}, 3);
  returns.insert(returns.end(), third.begin(), third.end());
  EXPECT_EQ(Boundaries(returns), (std::vector<size_t>{1, 3, 5, 7, 8}));
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
