// The rank variables read from a process's environment block.
#include "record/rank_environment.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace gpuos {
namespace {

using namespace std::string_view_literals;

std::string Block(std::initializer_list<std::string> entries) {
  std::string out;
  for (const std::string& e : entries) out += e + '\0';
  return out;
}

TEST(RankEnvironment, ReadsTorchrunVariables) {
  auto info = ParseRankEnvironment(Block({"PATH=/usr/bin", "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=8",
                                          "LOCAL_WORLD_SIZE=4", "GROUP_RANK=0", "MASTER_ADDR=node0",
                                          "MASTER_PORT=29500", "CUDA_VISIBLE_DEVICES=1,2"}));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->rank(), 3);
  EXPECT_EQ(info->local_rank(), 1);
  EXPECT_EQ(info->world_size(), 8);
  EXPECT_EQ(info->local_world_size(), 4);
  EXPECT_EQ(info->group_rank(), 0);
  EXPECT_TRUE(info->has_group_rank());
  EXPECT_EQ(info->master_addr(), "node0");
  EXPECT_EQ(info->master_port(), 29500u);
  EXPECT_EQ(info->cuda_visible_devices(), "1,2");
}

TEST(RankEnvironment, RankZeroIsSetNotAbsent) {
  auto info = ParseRankEnvironment(Block({"RANK=0", "WORLD_SIZE=2"}));
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->has_rank());
  EXPECT_EQ(info->rank(), 0);
  EXPECT_FALSE(info->has_local_rank());
  EXPECT_FALSE(info->has_cuda_visible_devices());
}

TEST(RankEnvironment, NoRankVariablesIsNoRank) {
  EXPECT_FALSE(ParseRankEnvironment(Block({"PATH=/bin", "MASTER_ADDR=x", "CUDA_VISIBLE_DEVICES=0"})).has_value());
  EXPECT_FALSE(ParseRankEnvironment("").has_value());
  // A name that only ends like one, and values that are not numbers.
  EXPECT_FALSE(ParseRankEnvironment(Block({"MY_RANK=2", "RANK=two"})).has_value());
  // A block cut without its last NUL still parses.
  auto cut = ParseRankEnvironment("A=1\0RANK=5"sv);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->rank(), 5);
}

TEST(RankEnvironment, ReadsThePythonHooksRankMark) {
  auto info = ParseRankMark("torch.distributed RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=4000");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->rank(), 1);
  EXPECT_EQ(info->world_size(), 2);
  EXPECT_FALSE(info->has_local_rank());
  EXPECT_EQ(info->master_addr(), "127.0.0.1");
  EXPECT_EQ(info->master_port(), 4000u);
  // Not the mark: another range, the prefix alone, no rank in it.
  EXPECT_FALSE(ParseRankMark("optimizer.step").has_value());
  EXPECT_FALSE(ParseRankMark("torch.distributed").has_value());
  EXPECT_FALSE(ParseRankMark("torch.distributed ").has_value());
  EXPECT_FALSE(ParseRankMark("torch.distributed MASTER_ADDR=x").has_value());
  EXPECT_FALSE(ParseRankMark("torch.distributedRANK=1").has_value());
}

TEST(RankEnvironment, ReadsALiveProcess) {
  ASSERT_EQ(setenv("RANK", "7", 1), 0);
  // The environ file is the block the process started with, not setenv's
  // later copy: a child started now sees RANK.
  pid_t child = fork();
  if (child == 0) {
    char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("5"), nullptr};
    execvp("sleep", argv);
    _exit(127);
  }
  ASSERT_GT(child, 0);
  std::optional<v1::RankInfo> info;
  for (int i = 0; i < 100 && !info; ++i) {
    usleep(20000);
    info = ReadRankInfo(child, "hostA");
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  unsetenv("RANK");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->rank(), 7);
  EXPECT_EQ(info->host(), "hostA");
  EXPECT_FALSE(ReadRankInfo(child, "hostA").has_value());  // gone
}

}  // namespace
}  // namespace gpuos
