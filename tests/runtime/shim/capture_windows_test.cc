// Capture windows end to end, on the CPU (CUPTI needs a GPU; the windows
// themselves do not): the shim counts the job's NVTX steps live, opens and
// closes windows by the spec, and the trace holds each edge at the step's
// own marks; the report says which steps have CUDA detail.  Also the
// command-line errors, and `gpuos-trace ctl --pid PID capture N` on a
// prepared job while gpuos-trace is attached to it.  Needs root (eBPF).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "analysis/step_analysis.h"
#include "common/monotonic_clock.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

struct Edges {
  std::vector<v1::Event> open, close;
};

Edges CaptureEdges(const rt::TraceContents& trace, uint32_t pid) {
  Edges edges;
  for (const v1::Event& e : trace.events) {
    if (!e.has_capture_window() || e.pid() != pid) continue;
    (e.capture_window().edge() == v1::CaptureWindow::OPEN ? edges.open : edges.close).push_back(e);
  }
  return edges;
}

// "step N" ranges of `pid`: N -> (start, end).
std::map<int64_t, std::pair<uint64_t, uint64_t>> StepRanges(const rt::TraceContents& trace, uint32_t pid) {
  std::map<int64_t, std::pair<uint64_t, uint64_t>> out;
  for (const v1::Event& e : trace.events) {
    int64_t n = 0;
    if (!e.has_nvtx_range() || e.pid() != pid || !absl::StartsWith(e.nvtx_range().name(), "step ") ||
        !absl::SimpleAtoi(e.nvtx_range().name().substr(5), &n)) {
      continue;
    }
    out[n] = {e.ts_ns(), e.ts_ns() + e.nvtx_range().duration_ns()};
  }
  return out;
}

rt::RunOptions LongRun() {
  rt::RunOptions options;
  options.timeout_s = 240;
  return options;
}

TEST(CaptureWindows, TheTrainersStepsTenToFourteenAreOneWindowInTheTraceAndTheReport) {
  GPUOS_REQUIRE_ROOT();
  const std::string trainer = GPUOS_TRAINER_BIN;
  if (access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << "gpuos-trainer not built (no LibTorch)";
  rt::TempDir dir;
  const std::string path = dir.File("capture.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--capture", "steps=10..14", "-o", path, "--", trainer,
                             "--device", "cpu", "--steps", "24", "--warmup", "2", "--batch-size", "16",
                             "--workers", "0"},
                            LongRun());
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  auto trace = rt::ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->header.capture_spec(), "steps=10..14");
  const uint32_t pid = trace->header.root_pid();
  const Edges edges = CaptureEdges(*trace, pid);
  ASSERT_EQ(edges.open.size(), 1u);
  ASSERT_EQ(edges.close.size(), 1u);
  EXPECT_EQ(edges.open[0].capture_window().step(), 10);
  EXPECT_EQ(edges.close[0].capture_window().step(), 14);
  EXPECT_EQ(edges.open[0].capture_window().reason(), "steps=10..14");
  // Each edge is the step's own mark: step 10's start, step 14's end.
  auto steps = StepRanges(*trace, pid);
  ASSERT_TRUE(steps.count(10) && steps.count(14));
  EXPECT_EQ(edges.open[0].ts_ns(), steps[10].first);
  EXPECT_EQ(edges.close[0].ts_ns(), steps[14].second);

  auto analysis = AnalyzeSteps(path, StepOptions());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  ASSERT_EQ(analysis->capture.windows.size(), 1u);
  EXPECT_EQ(analysis->capture.windows[0].first_step, 10);
  EXPECT_EQ(analysis->capture.windows[0].last_step, 14);
  size_t detail = 0;
  for (const StepRecord& s : analysis->steps) {
    EXPECT_EQ(s.cuda_detail, s.index >= 10 && s.index <= 14) << s.index;
    detail += s.cuda_detail;
  }
  EXPECT_EQ(detail, 5u);
  EXPECT_EQ(analysis->measured_steps, 5u);

  rt::RunResult report = rt::Run({rt::TracerPath(), "report", path});
  ASSERT_EQ(report.exit_code, 0) << report.Describe();
  EXPECT_TRUE(absl::StrContains(report.out, "capture windows (steps=10..14): 1 window; CUDA detail in 5 of"))
      << report.out;
}

TEST(CaptureWindows, ATimeWindowCountsFromTheStartAndNvtxWindowsFollowTheirRange) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string timed = dir.File("timed.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--capture", "after=300ms,for=400ms", "-o", timed, "--",
                             rt::WorkloadPath("nvtx_step_loop"), "--log", dir.File("l1"), "--seconds", "1.2"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  auto trace = rt::ReadTrace(timed);
  ASSERT_TRUE(trace.ok()) << trace.status();
  Edges edges = CaptureEdges(*trace, trace->header.root_pid());
  ASSERT_EQ(edges.open.size(), 1u);
  ASSERT_EQ(edges.close.size(), 1u);
  const uint64_t span = edges.close[0].ts_ns() - edges.open[0].ts_ns();
  EXPECT_GE(span, 398'000'000u);
  EXPECT_LT(span, 430'000'000u);
  // From the job's start (the recording's start is a few ms before it).
  const uint64_t after_start = edges.open[0].ts_ns() - trace->header.start_clock().monotonic_ns();
  EXPECT_GE(after_start, 300'000'000u);
  EXPECT_LT(after_start, 380'000'000u);
  auto steps = StepRanges(*trace, trace->header.root_pid());

  const std::string named = dir.File("named.gpuos");
  r = rt::Run({rt::TracerPath(), "-q", "--capture", "nvtx=step 7", "-o", named, "--",
               rt::WorkloadPath("nvtx_step_loop"), "--log", dir.File("l2"), "--seconds", "0.5"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  trace = rt::ReadTrace(named);
  ASSERT_TRUE(trace.ok()) << trace.status();
  edges = CaptureEdges(*trace, trace->header.root_pid());
  steps = StepRanges(*trace, trace->header.root_pid());
  ASSERT_EQ(edges.open.size(), 1u);
  ASSERT_EQ(edges.close.size(), 1u);
  ASSERT_TRUE(steps.count(7));
  EXPECT_EQ(edges.open[0].ts_ns(), steps[7].first);
  EXPECT_EQ(edges.close[0].ts_ns(), steps[7].second);
}

TEST(CaptureWindows, EveryDurationCapturesTwoStepsEachPeriodAndTimeWithoutStepMarks) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string stepped = dir.File("periodic.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--capture", "every=500ms,steps=2", "-o", stepped, "--",
                             rt::WorkloadPath("nvtx_step_loop"), "--log", dir.File("l1"), "--seconds", "1.7"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  auto trace = rt::ReadTrace(stepped);
  ASSERT_TRUE(trace.ok()) << trace.status();
  Edges edges = CaptureEdges(*trace, trace->header.root_pid());
  auto steps = StepRanges(*trace, trace->header.root_pid());
  // Steps 0-1, then the first two to begin after 0.5, 1.0 and 1.5 s (the
  // last may miss the job's end).
  ASSERT_GE(edges.open.size(), 3u);
  ASSERT_LE(edges.open.size(), 4u);
  ASSERT_EQ(edges.close.size(), edges.open.size());
  for (size_t i = 0; i < edges.open.size(); ++i) {
    const int64_t first = edges.close[i].capture_window().step() - 1;
    ASSERT_TRUE(steps.count(first) && steps.count(first + 1)) << first;
    EXPECT_EQ(edges.open[i].ts_ns(), steps[first].first) << "window " << i;
    EXPECT_EQ(edges.close[i].ts_ns(), steps[first + 1].second) << "window " << i;
    if (i > 0) {
      const uint64_t apart = edges.open[i].ts_ns() - edges.open[i - 1].ts_ns();
      EXPECT_GE(apart, 495'000'000u) << "window " << i;
      EXPECT_LT(apart, 650'000'000u) << "window " << i;
    }
  }
  // A process with no step marks gets a 200 ms time window each period
  // instead (from the first period on).
  const std::string unmarked = dir.File("unmarked.gpuos");
  r = rt::Run({rt::TracerPath(), "-q", "--capture", "every=500ms,steps=2", "-o", unmarked, "--", "/bin/sleep", "1.3"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  trace = rt::ReadTrace(unmarked);
  ASSERT_TRUE(trace.ok()) << trace.status();
  edges = CaptureEdges(*trace, trace->header.root_pid());
  ASSERT_EQ(edges.open.size(), 2u);
  ASSERT_EQ(edges.close.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(absl::StrContains(edges.open[i].capture_window().reason(), "no step marks: 200 ms"))
        << edges.open[i].capture_window().reason();
    const uint64_t span = edges.close[i].ts_ns() - edges.open[i].ts_ns();
    EXPECT_GE(span, 199'000'000u);
    EXPECT_LT(span, 300'000'000u);
  }
}

TEST(CaptureWindows, ABadSpecIsOneLineAndStartsNothing) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string path = dir.File("never.gpuos");
  const std::string marker = dir.File("ran");
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"--capture", "steps=5..2"}, {"--capture", "every=20"}, {"--capture", "every=10s"}, {"--capture", "frames=1"},
        {"--always-on", "--capture", "steps=1..2"}, {"--no-cuda", "--always-on"}}) {
    std::vector<std::string> argv = {rt::TracerPath(), "-o", path};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--", "touch", marker});
    rt::RunResult r = rt::Run(argv);
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_EQ(r.ErrLines().size(), 1u) << r.Describe();
    struct stat st {};
    EXPECT_NE(stat(path.c_str(), &st), 0) << "a trace was written for " << options[1];
    EXPECT_NE(stat(marker.c_str(), &st), 0) << "the command ran for " << options[1];
  }
}

TEST(CaptureWindows, CtlCaptureOpensAWindowOfThatManyStepsInAnAttachedPreparedJob) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string log = dir.File("ranges.log");
  rt::Child job = rt::Child::Start(
      {rt::TracerPath(), "--prepare", "--", rt::WorkloadPath("nvtx_step_loop"), "--log", log, "--seconds", "30"});
  ASSERT_TRUE(rt::WaitUntil(
      [&] {
        return absl::StrContains(rt::ReadFile(absl::StrCat("/proc/", job.pid(), "/maps")).value_or(""),
                                 "libgpuos_shim.so");
      },
      20));
  usleep(300'000);
  const std::string path = dir.File("attach.gpuos");
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "-q", "--pid", std::to_string(job.pid()), "--capture",
                                       "on-demand", "--duration", "3s", "-o", path});
  // The shim's own answer, through its control socket, while gpuos-trace
  // holds the attach connection.
  usleep(1'200'000);
  const uint64_t asked_ns = MonotonicNs();
  rt::RunResult ctl = rt::Run({rt::TracerPath(), "ctl", "--pid", std::to_string(job.pid()), "capture", "3"});
  EXPECT_EQ(ctl.exit_code, 0) << ctl.Describe();
  EXPECT_TRUE(absl::StrContains(ctl.out, "capture the next 3 steps")) << ctl.Describe();
  rt::RunResult traced = tracer.Wait(30);
  ASSERT_EQ(traced.exit_code, 0) << traced.Describe();
  job.Signal(SIGTERM);
  ASSERT_EQ(job.Wait(30).exit_code, 0);

  auto trace = rt::ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->header.capture_spec(), "on-demand");
  const Edges edges = CaptureEdges(*trace, static_cast<uint32_t>(job.pid()));
  ASSERT_EQ(edges.open.size(), 1u);
  ASSERT_EQ(edges.close.size(), 1u);
  const int64_t first = edges.open[0].capture_window().step();
  EXPECT_EQ(edges.close[0].capture_window().step(), first + 2);
  EXPECT_EQ(edges.open[0].capture_window().reason(), "ctl capture 3");
  auto steps = StepRanges(*trace, static_cast<uint32_t>(job.pid()));
  ASSERT_TRUE(steps.count(first) && steps.count(first + 2));
  EXPECT_EQ(edges.open[0].ts_ns(), steps[first].first);
  EXPECT_EQ(edges.close[0].ts_ns(), steps[first + 2].second);
  // Opened once asked (the trace's clock is CLOCK_MONOTONIC), inside the
  // attach; on a loaded machine the attach itself may take most of the
  // 1.2 s waited before asking.
  EXPECT_GT(edges.open[0].ts_ns(), asked_ns);
  EXPECT_GT(edges.open[0].ts_ns(), trace->header.attach().start_ns());
}

}  // namespace
}  // namespace gpuos
