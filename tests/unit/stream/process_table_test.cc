// The process table a flight recorder's segments start with keeps each
// process's rank (RankInfo), so that a window whose exec rotated out still
// names the ranks; a new image forgets the old one's.
#include "stream/process_table.h"

#include <vector>

#include <gtest/gtest.h>

namespace gpuos {
namespace {

v1::Event Start(uint32_t pid, uint64_t ts) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(pid);
  e.mutable_process_start()->set_comm("python3");
  return e;
}

v1::Event Rank(uint32_t pid, int32_t rank, uint64_t ts) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(pid);
  e.mutable_rank_info()->set_rank(rank);
  e.mutable_rank_info()->set_world_size(2);
  e.mutable_rank_info()->set_host("h");
  return e;
}

std::vector<v1::Event> Snapshot(ProcessTable& table) {
  std::vector<v1::Event> out;
  table.ForEachSnapshotEvent(1000, [&](const v1::Event& e) { out.push_back(e); });
  return out;
}

TEST(ProcessTable, SnapshotKeepsEachProcessRank) {
  ProcessTable table;
  table.Track(Start(10, 1));
  table.Track(Start(11, 2));
  table.Track(Rank(11, 1, 3));
  std::vector<v1::Event> snap = Snapshot(table);
  int ranks = 0;
  for (size_t i = 0; i < snap.size(); ++i) {
    if (!snap[i].has_rank_info()) continue;
    ++ranks;
    EXPECT_EQ(snap[i].pid(), 11u);
    EXPECT_EQ(snap[i].rank_info().rank(), 1);
    EXPECT_EQ(snap[i].rank_info().host(), "h");
    ASSERT_GT(i, 0u);
    EXPECT_TRUE(snap[i - 1].has_process_start()) << "right after its process's start";
    EXPECT_EQ(snap[i - 1].pid(), 11u);
  }
  EXPECT_EQ(ranks, 1);

  v1::Event exec;
  exec.set_ts_ns(4);
  exec.set_pid(11);
  exec.set_tid(11);
  exec.mutable_exec()->set_comm("sh");
  exec.mutable_exec()->set_old_tid(11);
  table.Track(exec);
  for (const v1::Event& e : Snapshot(table)) EXPECT_FALSE(e.has_rank_info()) << "the new image has none yet";
}

}  // namespace
}  // namespace gpuos
