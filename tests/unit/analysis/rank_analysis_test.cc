// Which processes are ranks: the outermost process with a rank number in
// its environment; children that inherited it, and forked workers, belong
// to it; the launcher is no rank; a new image without one is no rank.
// Without ranks, the processes that each ran a training loop of their own
// (hogwild) are analyzed one by one as training processes.
#include "analysis/rank_analysis.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "analysis/step_options.h"

namespace gpuos {
namespace {

v1::Event Start(uint32_t pid, uint32_t ppid, uint64_t ts) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(pid);
  e.mutable_process_start()->set_ppid(ppid);
  e.mutable_process_start()->set_comm("python3");
  return e;
}

v1::Event Rank(uint32_t pid, int32_t rank, uint64_t ts, const std::string& cvd = "") {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(pid);
  v1::RankInfo* r = e.mutable_rank_info();
  r->set_rank(rank);
  r->set_local_rank(rank);
  r->set_world_size(2);
  r->set_host("h");
  if (!cvd.empty()) r->set_cuda_visible_devices(cvd);
  return e;
}

TEST(RankAnalysis, RanksAndWhatBelongsToThem) {
  v1::TraceHeader header;
  std::vector<v1::Event> events = {
      Start(1, 0, 1),                 // the launcher
      Start(2, 1, 2), Rank(2, 0, 3, "3"),
      Start(3, 1, 4), Rank(3, 1, 5),
      Start(4, 2, 6), Rank(4, 0, 7),  // a subprocess of rank 0 with its environment
      Start(5, 3, 8),                 // a data worker of rank 1
      Start(6, 1, 9), Rank(6, 5, 10),  // a process that re-execs without a rank
  };
  v1::Event exec;
  exec.set_ts_ns(11);
  exec.set_pid(6);
  exec.set_tid(6);
  exec.mutable_exec()->set_old_tid(6);
  events.push_back(exec);
  auto a = AnalyzeRankEvents(header, events, StepOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->ranks.size(), 2u);
  EXPECT_EQ(a->ranks[0].rank(), 0);
  EXPECT_EQ(a->ranks[0].pid, 2u);
  EXPECT_EQ(a->ranks[0].pids, (std::vector<uint32_t>{2, 4}));
  ASSERT_TRUE(a->ranks[0].gpu.has_value());
  EXPECT_EQ(*a->ranks[0].gpu, 3u) << "from CUDA_VISIBLE_DEVICES";
  EXPECT_EQ(a->ranks[1].rank(), 1);
  EXPECT_EQ(a->ranks[1].pids, (std::vector<uint32_t>{3, 5}));
  EXPECT_FALSE(a->ranks[1].gpu.has_value());
  EXPECT_FALSE(a->straggler.has_value()) << "no steps";
}

TEST(RankAnalysis, NoRankInfoNoRanks) {
  v1::TraceHeader header;
  auto a = AnalyzeRankEvents(header, {Start(1, 0, 1), Start(2, 1, 2)}, StepOptions{});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->ranks.empty());
}

// `n` optimizer.step ranges on `pid`'s main thread, one every `period`
// from `t0`, each 1 ms long; or the uprobe's backward marks.
void Steps(std::vector<v1::Event>& events, uint32_t pid, int n, uint64_t t0, uint64_t period, bool uprobe = false) {
  for (int i = 0; i < n; ++i) {
    v1::Event e;
    e.set_ts_ns(t0 + i * period);
    e.set_pid(pid);
    e.set_tid(pid);
    if (uprobe) {
      e.mutable_nvtx_mark()->set_name(kDefaultBackwardRangeName);
      e.mutable_nvtx_mark()->set_domain(kBackwardUprobeDomain);
    } else {
      e.mutable_nvtx_range()->set_name(kDefaultOptimizerRangeName);
      e.mutable_nvtx_range()->set_domain(kPythonHookDomain);
      e.mutable_nvtx_range()->set_duration_ns(1'000'000);
    }
    events.push_back(e);
  }
}

constexpr uint64_t kMs = 1'000'000;

TEST(RankAnalysis, ProcessesThatTrainOnTheirOwnAreAnalyzedEach) {
  v1::TraceHeader header;
  std::vector<v1::Event> events = {
      Start(1, 0, 1),  // the script's main process: it starts them and trains none
      Start(2, 1, 2), Start(3, 1, 3),
      Start(4, 2, 4),  // process 2's data worker
      Start(5, 1, 5),  // two optimizer steps: not a training loop
  };
  Steps(events, 2, 20, 100 * kMs, 10 * kMs);
  Steps(events, 3, 30, 101 * kMs, 7 * kMs, /*uprobe=*/true);
  Steps(events, 5, 2, 102 * kMs, 10 * kMs);
  std::sort(events.begin(), events.end(),
            [](const v1::Event& a, const v1::Event& b) { return a.ts_ns() < b.ts_ns(); });
  auto a = AnalyzeRankEvents(header, events, StepOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->ranks.empty());
  ASSERT_EQ(a->training_processes.size(), 2u);
  const RankSummary& p2 = a->training_processes[0];
  const RankSummary& p3 = a->training_processes[1];
  EXPECT_EQ(p2.pid, 2u);
  EXPECT_EQ(p2.pids, (std::vector<uint32_t>{2, 4}));
  EXPECT_FALSE(p2.info.has_rank());
  EXPECT_EQ(p2.steps.source, StepSource::kOptimizerSteps);
  EXPECT_EQ(p2.steps.pid, 2u);
  EXPECT_EQ(p2.steps.steps.size(), 19u) << "between 20 optimizer steps' ends";
  EXPECT_NEAR(p2.steps.duration_ns.mean, 10 * kMs, 1);
  EXPECT_EQ(p3.pid, 3u);
  EXPECT_EQ(p3.steps.source, StepSource::kBackwardUprobe);
  EXPECT_EQ(p3.steps.pid, 3u);
  EXPECT_NEAR(p3.steps.duration_ns.mean, 7 * kMs, 1);
  EXPECT_FALSE(a->training_processes_communicate);
  EXPECT_FALSE(a->straggler.has_value());
  EXPECT_FALSE(a->straggler_not_judged.empty());
}

TEST(RankAnalysis, OneTrainingLoopIsTheStepAnalysisOwn) {
  v1::TraceHeader header;
  std::vector<v1::Event> events = {Start(1, 0, 1), Start(2, 1, 2)};
  Steps(events, 2, 20, 100 * kMs, 10 * kMs);
  auto a = AnalyzeRankEvents(header, events, StepOptions{});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->training_processes.empty());
}

TEST(RankAnalysis, RanksAreNotTrainingProcesses) {
  v1::TraceHeader header;
  std::vector<v1::Event> events = {Start(1, 0, 1), Start(2, 1, 2), Rank(2, 0, 3), Start(3, 1, 4), Rank(3, 1, 5)};
  Steps(events, 2, 20, 100 * kMs, 10 * kMs);
  Steps(events, 3, 20, 100 * kMs, 10 * kMs);
  auto a = AnalyzeRankEvents(header, events, StepOptions{});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ranks.size(), 2u);
  EXPECT_TRUE(a->training_processes.empty());
}

TEST(RankAnalysis, TrainingProcessesWithCollectivesAreSaidToBeUnnamedRanks) {
  // torch.multiprocessing.spawn's ranks without the Python hook: no
  // RankInfo, but each runs NCCL's kernels inside its steps.
  v1::TraceHeader header;
  std::vector<v1::Event> events = {Start(1, 0, 1), Start(2, 1, 2), Start(3, 1, 3)};
  for (uint32_t pid : {2u, 3u}) {
    Steps(events, pid, 10, 100 * kMs, 10 * kMs);
    for (int i = 0; i < 9; ++i) {
      v1::Event k;
      k.set_ts_ns(103 * kMs + i * 10 * kMs);
      k.set_pid(pid);
      k.set_tid(pid);
      k.mutable_gpu_kernel()->set_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
      k.mutable_gpu_kernel()->set_duration_ns(2 * kMs);
      events.push_back(k);
    }
  }
  std::sort(events.begin(), events.end(),
            [](const v1::Event& a, const v1::Event& b) { return a.ts_ns() < b.ts_ns(); });
  auto a = AnalyzeRankEvents(header, events, StepOptions{});
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->training_processes.size(), 2u);
  EXPECT_TRUE(a->training_processes_communicate);
}

}  // namespace
}  // namespace gpuos
