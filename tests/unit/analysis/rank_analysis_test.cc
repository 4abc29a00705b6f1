// Which processes are ranks: the outermost process with a rank number in
// its environment; children that inherited it, and forked workers, belong
// to it; the launcher is no rank; a new image without one is no rank.
#include "analysis/rank_analysis.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpuos
