// The straggler rule: the rank the others wait for, and why; none where the
// ranks took turns holding each other back.
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
  r.cpu.data_wait_ns = static_cast<uint64_t>(data_ms * kMs);
  r.cpu.other_ns = static_cast<uint64_t>(other_ms * kMs);
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

// A capture window's two steps (one of them its opening) cannot tell a
// straggler from a rank that opened its window later: not judged, and why.
TEST(Straggler, TooFewStepsWithDetailAreNotJudged) {
  std::vector<RankLoad> ranks = {Rank(0, 32, 5, 60), Rank(1, 1, 35, 30)};
  ASSERT_TRUE(FindStraggler(ranks).has_value());
  EXPECT_EQ(StragglerNotJudged(ranks), "");
  ranks[1].steps = kStragglerMinSteps - 1;
  ranks[1].steps_with_detail_only = true;
  EXPECT_FALSE(FindStraggler(ranks).has_value());
  EXPECT_EQ(StragglerNotJudged(ranks),
            "rank 1 has 4 measured steps with CUDA detail; it takes 5 of every rank's (longer or more capture windows)");
  RankLoad idle = Rank(2, 0, 0, 0);
  idle.steps = 0;
  EXPECT_EQ(StragglerNotJudged({Rank(0, 30, 5, 60), idle}),
            "it takes two ranks with steps in the trace; trace every rank, e.g. --pid on the launcher");
}

TEST(Straggler, PreemptedRankNamesPreemption) {
  // Its extra time is in the loop's own code, and it is off the CPU,
  // preempted, for most of it.
  RankLoad slow = Rank(1, 1, 5, 60);
  slow.off_cpu.preempted_ns = static_cast<uint64_t>(25 * kMs);
  slow.off_cpu.runqueue_ns = static_cast<uint64_t>(4 * kMs);
  auto s = FindStraggler({Rank(0, 30, 5, 60), slow});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->cause, "preemption") << s->cause_detail;
}

TEST(Straggler, BlockedOnItsOwnThreadsIsNotCpuWork) {
  // Its extra time is in the loop's own code, where it waited in futex
  // (for its autograd thread, the GIL) rather than ran: as NCCL ranks of a
  // DDP job do, whose collectives' waits are on the GPU (out of sync).
  RankLoad slow = Rank(0, 1, 5, 60);
  slow.off_cpu.futex_ns = static_cast<uint64_t>(48 * kMs);
  RankLoad other = Rank(1, 25, 5, 35);
  other.off_cpu.futex_ns = static_cast<uint64_t>(15 * kMs);
  auto s = FindStraggler({slow, other});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 0);
  EXPECT_EQ(s->cause, "thread_waits") << s->cause_detail;
  // Running its own code longer is CPU work, whatever its waits.
  slow.off_cpu.futex_ns = other.off_cpu.futex_ns;
  s = FindStraggler({slow, other});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cause, "cpu_work") << s->cause_detail;
}

TEST(Straggler, DataWaitsTheChainsFoundInItsOwnCodeAreTheDataLoader) {
  // Attached (no fetch marks): the slow rank's waits for its data workers
  // sit in its own code, and its data-loading stage holds them.
  RankLoad slow = Rank(1, 1, 0, 75);
  slow.data_stage_ns = 20 * kMs;
  slow.off_cpu.futex_ns = static_cast<uint64_t>(20 * kMs);
  RankLoad other = Rank(0, 25, 0, 80);
  auto s = FindStraggler({other, slow});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->cause, "data_loader") << s->cause_detail;
  // Without the stage, the same waits read as waits on its own threads.
  slow.data_stage_ns = 0;
  s = FindStraggler({other, slow});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cause, "thread_waits") << s->cause_detail;
}

TEST(Straggler, APreemptedDataFetchIsStillTheDataLoader) {
  // The extra time is inside its data fetches; it was preempted there.
  RankLoad slow = Rank(1, 1, 35, 30);
  slow.off_cpu.preempted_ns = static_cast<uint64_t>(20 * kMs);
  auto s = FindStraggler({Rank(0, 30, 5, 60), slow});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cause, "data_loader") << s->cause_detail;
  EXPECT_NE(s->cause_detail.find("preemption"), std::string::npos) << s->cause_detail;
}

TEST(Straggler, NcclWaitsComeOutOfSync) {
  // GPU ranks: the others wait for the straggler in synchronize calls on
  // NCCL kernels; the straggler's own extra time is in kernel launches.
  auto gpu_rank = [](int32_t rank, double exposed_ms, double sync_ms, double launch_ms) {
    RankLoad r = Rank(rank, exposed_ms, 5, 10);
    r.cpu.sync_ns = static_cast<uint64_t>(sync_ms * kMs);
    r.cpu.launch_api_ns = static_cast<uint64_t>(launch_ms * kMs);
    return r;
  };
  auto s = FindStraggler({gpu_rank(0, 40, 45, 10), gpu_rank(1, 2, 7, 48), gpu_rank(2, 41, 46, 10)});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->cause, "kernel_dispatch") << s->cause_detail;
}

// Per-step waits over 60 steps of 30 ms: `late(i)` says whether the rank
// is the late one in step i (it then waits 1 ms, the other 21 ms).
template <typename Late>
RankLoad WithSteps(RankLoad r, Late late) {
  r.steps = 60;
  r.step_ns = 30 * kMs;
  double sum = 0;
  for (int i = 0; i < 60; ++i) {
    const uint64_t exposed = static_cast<uint64_t>((late(i) ? 1 : 21) * kMs);
    r.step_waits.push_back({static_cast<uint64_t>(1'000 * kMs + i * 100 * kMs), exposed});
    sum += static_cast<double>(exposed);
  }
  r.exposed_comm_ns = sum / 60;
  r.cpu.data_wait_ns /= 4, r.cpu.other_ns /= 4;
  return r;
}

TEST(Straggler, RanksTakingTurnsHaveNone) {
  // Rank 0 is late in the first 36 steps, rank 1 in the last 24: on average
  // rank 0 waits 4 ms less a step (over the 1 ms and 10% thresholds), but
  // it held the other back in only 6 of the 10 parts of the run.
  std::vector<RankLoad> ranks = {WithSteps(Rank(0, 0, 5, 60), [](int i) { return i < 36; }),
                                 WithSteps(Rank(1, 0, 5, 60), [](int i) { return i >= 36; })};
  std::string turns;
  EXPECT_FALSE(FindStraggler(ranks, &turns).has_value());
  EXPECT_NE(turns.find("took turns"), std::string::npos) << turns;
  EXPECT_NE(turns.find("6 of 10 parts"), std::string::npos) << turns;
}

TEST(Straggler, ARankLateInMostPartsIsNamed) {
  // Rank 0 is late but in the first 6 steps: in 9 of the 10 parts.
  std::vector<RankLoad> ranks = {WithSteps(Rank(0, 0, 35, 30), [](int i) { return i >= 6; }),
                                 WithSteps(Rank(1, 0, 5, 60), [](int i) { return i < 6; })};
  std::string turns;
  auto s = FindStraggler(ranks, &turns);
  ASSERT_TRUE(s.has_value()) << turns;
  EXPECT_EQ(s->rank, 0);
  EXPECT_TRUE(turns.empty());
}

}  // namespace
}  // namespace gpuos
