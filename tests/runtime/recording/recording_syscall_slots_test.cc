// The kernel keeps a traced thread's syscall totals in a per-thread slot
// while it runs and moves them into the syscall_stats hash when it exits or
// execs; threads that find no free slot use the hash directly
// (bpf/syscalls.h).  These tests record tests/workloads/ground_truth (16
// threads in 5 processes, one of them exec'd) with no slots, with one or
// three (so threads share slots one after another, and some find none) and
// with the default, and check every thread's mmap, munmap and futex totals
// against what other BPF programs recorded call by call: they must agree
// exactly whichever path a thread took.  Needs root (eBPF).
#include <sys/syscall.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bpf/futex.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

constexpr int kThreads = 3;
constexpr int kWorkers = 3;
constexpr int kWorkerThreads = 2;
constexpr int64_t kMmaps = 9;
constexpr int64_t kFutexWakes = 21;
constexpr int kExpectedThreads = 1 + kThreads + (kWorkers + 1) * (1 + kWorkerThreads);

struct PerThread {
  int64_t mmap_events = 0;
  int64_t munmap_events = 0;
  // futex(2) calls recorded one by one: the waits.
  int64_t futex_wait_events = 0;
  int64_t wake_calls = 0;
};

class RecordingSyscallSlots : public ::testing::TestWithParam<int> {};

TEST_P(RecordingSyscallSlots, EveryThreadsTotalsAgreeWithItsCallByCallRecords) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace_path = dir.File("slots.gpuos");
  const std::string report = dir.File("report.txt");
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", trace_path};
  if (GetParam() >= 0) {
    argv.push_back("--syscall-slots");
    argv.push_back(absl::StrCat(GetParam()));
  }
  for (std::string arg :
       {std::string("--"), rt::WorkloadPath("ground_truth"), std::string("--threads"),
        absl::StrCat(kThreads), std::string("--workers"), absl::StrCat(kWorkers),
        std::string("--worker-threads"), absl::StrCat(kWorkerThreads), std::string("--mmaps"),
        absl::StrCat(kMmaps), std::string("--futex-waits"), std::string("2"),
        std::string("--futex-wakes"), absl::StrCat(kFutexWakes), std::string("--futex-timeout-us"),
        std::string("500"), std::string("--sleeps"), std::string("1"), std::string("--sleep-us"),
        std::string("500"), std::string("--exec"), std::string("--report"), report}) {
    argv.push_back(arg);
  }
  rt::RunOptions options;
  options.timeout_s = 120;
  const rt::RunResult run = rt::Run(argv, options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<rt::GroundTruthLine> lines = rt::ReadGroundTruthReport(report);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kExpectedThreads)) << run.Describe();
  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();

  std::map<int64_t, PerThread> recorded;
  for (const v1::Event& e : trace->events) {
    PerThread& t = recorded[e.tid()];
    if (e.has_mmap()) ++t.mmap_events;
    if (e.has_munmap()) ++t.munmap_events;
    // Waits made through futex(2), not futex_waitv(2) or futex_wait(2).
    if (e.has_futex_wait() && e.futex_wait().op() != GPUOS_FUTEX_WAITV &&
        e.futex_wait().op() != GPUOS_FUTEX2_WAIT) {
      ++t.futex_wait_events;
    }
    // Cumulative: the last one counts.
    if (e.has_futex_wakes()) t.wake_calls = static_cast<int64_t>(e.futex_wakes().calls());
    if (e.has_tracer_stats()) {
      EXPECT_TRUE(e.tracer_stats().ring_buffer_drops().empty());
      EXPECT_TRUE(e.tracer_stats().map_full_drops().empty());
    }
  }
  const auto totals = rt::LatestSyscallStats(*trace);
  auto calls = [&](int64_t tid, int nr) -> int64_t {
    auto it = totals.find({static_cast<uint32_t>(tid), nr});
    return it == totals.end() ? 0 : static_cast<int64_t>(it->second.calls());
  };
  for (const rt::GroundTruthLine& line : lines) {
    SCOPED_TRACE(line.raw);
    const int64_t tid = line.Int("tid");
    const PerThread& t = recorded[tid];
    ASSERT_GE(t.mmap_events, kMmaps) << "the thread's own mmap calls were not recorded";
    EXPECT_EQ(calls(tid, SYS_mmap), t.mmap_events);
    EXPECT_EQ(calls(tid, SYS_munmap), t.munmap_events);
    // futex(2): every call is a wait (recorded one by one) or a wake (counted).
    EXPECT_GE(t.wake_calls, kFutexWakes);
    EXPECT_EQ(calls(tid, SYS_futex), t.futex_wait_events + t.wake_calls);
  }
}

// -1: the default number of slots.
INSTANTIATE_TEST_SUITE_P(Slots, RecordingSyscallSlots, ::testing::Values(0, 1, 3, -1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param < 0 ? std::string("Default")
                                                 : absl::StrCat(info.param, "Slots");
                         });

}  // namespace
}  // namespace gpuos
