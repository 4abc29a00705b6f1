// The straggler rule: the rank the others wait for, and why.
#include "analysis/straggler.h"

#include <gtest/gtest.h>

namespace gpuos {
namespace {

constexpr double kMs = 1e6;

RankLoad Rank(int32_t rank, double exposed_ms, double data_ms, double other_ms) {
  RankLoad r;
  r.rank = rank;
  r.pid = 1000 + rank;
  r.steps = 20;
  r.step_ns = 100 * kMs;
  r.exposed_comm_ns = exposed_ms * kMs;
  r.stage_ns[static_cast<size_t>(Stage::kDataLoading)] = data_ms * kMs;
  r.stage_ns[static_cast<size_t>(Stage::kOther)] = other_ms * kMs;
  return r;
}

TEST(Straggler, SlowDataLoaderRankIsNamed) {
  // Rank 2 loads data 30 ms longer; the others wait ~30 ms in the allreduce
  // (in their "other" stage).
  std::vector<RankLoad> ranks = {Rank(0, 32, 5, 60), Rank(1, 31, 5, 61), Rank(2, 1, 35, 30), Rank(3, 33, 5, 59)};
  auto s = FindStraggler(ranks);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->pid, 1002u);
  EXPECT_EQ(s->cause, "data_loader");
  EXPECT_NEAR(s->cost_ns_per_step, 31 * kMs, 0.01 * kMs);
}

TEST(Straggler, EvenRanksHaveNone) {
  EXPECT_FALSE(FindStraggler({Rank(0, 10, 5, 60), Rank(1, 10.4, 5, 61)}).has_value());
}

TEST(Straggler, TwoSlowRanksAreNotOneStraggler) {
  EXPECT_FALSE(FindStraggler({Rank(0, 30, 5, 60), Rank(1, 1, 35, 30), Rank(2, 1.2, 35, 30)}).has_value());
}

TEST(Straggler, OneRankOrNoStepsIsNone) {
  EXPECT_FALSE(FindStraggler({Rank(0, 30, 5, 60)}).has_value());
  RankLoad idle = Rank(1, 0, 0, 0);
  idle.steps = 0;
  EXPECT_FALSE(FindStraggler({Rank(0, 30, 5, 60), idle}).has_value());
}

TEST(Straggler, PreemptedRankNamesPreemption) {
  RankLoad slow = Rank(1, 1, 5, 30);
  slow.stage_ns[static_cast<size_t>(Stage::kOsOverhead)] = 30 * kMs;
  slow.off_cpu.preempted_ns = static_cast<uint64_t>(25 * kMs);
  slow.off_cpu.runqueue_ns = static_cast<uint64_t>(4 * kMs);
  auto s = FindStraggler({Rank(0, 30, 5, 60), slow});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->cause, "preemption");
}

}  // namespace
}  // namespace gpuos
