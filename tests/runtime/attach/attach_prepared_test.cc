// `gpuos-trace --prepare -- cmd` then `gpuos-trace --pid`: a job started
// with the shim loaded but idle (for sites that forbid ptrace) is switched
// on by the attach and off by the detach.  tests/workloads/nvtx_step_loop
// logs every NVTX "step N" range it makes; the trace must hold an unbroken
// run of them, each the same range (name, start, length), all inside the
// attach window and covering it but for the edges, and the report must
// find the steps.  Needs root for the attach.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

struct LoggedRange {
  uint64_t start = 0;
  uint64_t end = 0;
};

std::map<int, LoggedRange> ReadRanges(const std::string& path) {
  std::map<int, LoggedRange> out;
  std::ifstream in(path);
  std::string kind;
  int n;
  LoggedRange r;
  while (in >> kind >> n >> r.start >> r.end) out[n] = r;
  return out;
}

TEST(AttachPrepared, NvtxRangesOfThePreparedJobCoverTheAttachWindow) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string log = dir.File("ranges.log");
  rt::Child job = rt::Child::Start(
      {rt::TracerPath(), "--prepare", "--", rt::WorkloadPath("nvtx_step_loop"), "--log", log});
  // gpuos-trace execs the job: same pid; the shim is in it and listening.
  ASSERT_TRUE(rt::WaitUntil(
      [&] {
        return absl::StrContains(rt::ReadFile(absl::StrCat("/proc/", job.pid(), "/maps")).value_or(""),
                                 "libgpuos_shim.so");
      },
      20));
  usleep(300'000);
  const std::string trace_path = dir.File("attach.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "--pid", std::to_string(job.pid()), "--duration",
                             "1s", "-o", trace_path});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "CUDA: prepared")) << r.err;
  usleep(300'000);
  job.Signal(SIGTERM);
  ASSERT_EQ(job.Wait(30).exit_code, 0);

  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  const uint64_t start = trace->header.attach().start_ns();
  const uint64_t end = trace->trailer.attach_end_ns();
  std::map<int, LoggedRange> logged = ReadRanges(log);
  std::map<int, uint64_t> traced_start;  // step number -> traced start
  for (const v1::Event& e : trace->events) {
    if (!e.has_nvtx_range() || static_cast<pid_t>(e.pid()) != job.pid()) continue;
    int n = -1;
    ASSERT_TRUE(absl::StartsWith(e.nvtx_range().name(), "step ") &&
                absl::SimpleAtoi(e.nvtx_range().name().substr(5), &n))
        << e.nvtx_range().name();
    ASSERT_TRUE(logged.count(n)) << n;
    const LoggedRange& l = logged[n];
    // The shim's timestamps are taken inside push/pop, the job's around them.
    EXPECT_GE(e.ts_ns(), l.start);
    EXPECT_LE(e.ts_ns() + e.nvtx_range().duration_ns(), l.end);
    EXPECT_GE(e.ts_ns(), start);
    EXPECT_LE(e.ts_ns() + e.nvtx_range().duration_ns(), end);
    EXPECT_TRUE(traced_start.emplace(n, e.ts_ns()).second) << "step " << n << " twice";
  }
  ASSERT_FALSE(traced_start.empty());
  // An unbroken run: nothing lost in the middle.
  const int first = traced_start.begin()->first, last = traced_start.rbegin()->first;
  EXPECT_EQ(static_cast<int>(traced_start.size()), last - first + 1);
  // Covering the window but for the attach handshake and the detach flush:
  // every logged range inside [start + 50 ms, end - 10 ms] is there.
  int expected_inside = 0;
  for (const auto& [n, l] : logged) {
    if (l.start >= start + 50'000'000 && l.end <= end - 10'000'000) {
      ++expected_inside;
      EXPECT_TRUE(traced_start.count(n)) << "step " << n << " inside the window is missing";
    }
  }
  EXPECT_GT(expected_inside, 200);  // ~3 ms steps for ~1 s

  // The report finds the steps (NVTX ranges named like steps).
  rt::RunResult report = rt::Run({rt::TracerPath(), "report", "--format", "json", trace_path});
  ASSERT_EQ(report.exit_code, 0) << report.Describe();
  EXPECT_TRUE(absl::StrContains(report.out, "nvtx_step_ranges")) << report.out.substr(0, 2000);
}

TEST(AttachPrepared, PrepareNeedsACommandAndRunsItAsItself) {
  rt::RunResult missing = rt::Run({rt::TracerPath(), "--prepare"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(missing.err, "--prepare needs a command")) << missing.err;
  rt::RunResult bad = rt::Run({rt::TracerPath(), "--prepare", "--", "/nonexistent/x"});
  EXPECT_EQ(bad.exit_code, 127);
  EXPECT_TRUE(absl::StrContains(bad.err, "cannot run '/nonexistent/x'")) << bad.err;
  // No privileges needed; the exit code is the command's own.
  rt::RunResult ok = rt::Run({rt::TracerPath(), "--prepare", "--", "/bin/sh", "-c",
                              "case \"$LD_PRELOAD\" in *libgpuos_shim.so*) exit 7;; esac; exit 1"});
  EXPECT_EQ(ok.exit_code, 7) << ok.Describe();
}

}  // namespace
}  // namespace gpuos
