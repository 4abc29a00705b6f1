// --flight-recorder on a real launched recording: a ground_truth run whose
// events far outgrow a 256 KiB ring, dumped mid-run by SIGUSR1 and by
// `gpuos-trace ctl dump`, and at its end.  Each dump is a complete trace
// that `gpuos-trace report` reads, says first that it is a window, holds
// only the latest events, and names the thread of every event.  Needs root
// (eBPF).
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

constexpr uint64_t kRingBytes = 256 << 10;

// The highest segment number in the ring's directory (-1: none yet).
int NewestSegment(const std::string& dir) {
  int newest = -1;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      absl::string_view name = e->d_name;
      int n = 0;
      if (absl::ConsumePrefix(&name, "seg-") && absl::ConsumeSuffix(&name, ".gpuos") && absl::SimpleAtoi(name, &n)) {
        newest = std::max(newest, n);
      }
    }
    closedir(d);
  }
  return newest;
}

// When the event's interval ends: what a window must reach to hold it.
uint64_t EventEndNs(const v1::Event& e) {
  if (e.has_off_cpu()) return e.ts_ns() + e.off_cpu().duration_ns();
  if (e.has_futex_wait()) return e.ts_ns() + e.futex_wait().duration_ns();
  if (e.has_mmap()) return e.ts_ns() + e.mmap().duration_ns();
  if (e.has_munmap()) return e.ts_ns() + e.munmap().duration_ns();
  if (e.has_page_faults()) return e.page_faults().last_ns();
  return e.ts_ns();
}

// Checks one dump: complete, a window of the latest events, every thread
// named, and readable by `gpuos-trace report` which says so first.
void CheckWindow(const std::string& path, bool expect_rotation) {
  SCOPED_TRACE(path);
  auto trace = rt::ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->status.ok()) << trace->status;
  EXPECT_TRUE(trace->has_trailer);
  EXPECT_EQ(trace->trailer.events_written(), trace->events.size());
  ASSERT_TRUE(trace->header.has_flight_window());
  const v1::FlightWindow& w = trace->header.flight_window();
  EXPECT_EQ(w.size_limit_bytes(), kRingBytes);
  EXPECT_FALSE(trace->header.command_line().empty()) << "the recording's header is kept";
  if (expect_rotation) {
    EXPECT_GT(w.events_rotated_out(), 0u);
    EXPECT_GT(w.start_ns(), w.recording_start_clock().monotonic_ns());
    EXPECT_LT(trace->events.size(), w.events_recorded());
  }

  std::set<uint32_t> processes, threads;
  size_t unnamed = 0, before_window = 0;
  for (const v1::Event& e : trace->events) {
    if (e.has_process_start()) {
      processes.insert(e.pid());
      threads.insert(e.tid());
      // Only the table at the window's head can hold the first start of the
      // job once its real start has rotated out.
      if (expect_rotation && e.process_start().is_root()) EXPECT_TRUE(e.process_start().preexisting());
      continue;
    }
    if (e.has_thread_start()) {
      threads.insert(e.tid());
      continue;
    }
    if (e.has_exec() && e.exec().old_tid() != e.pid()) threads.insert(e.pid());
    if (e.tid() != 0 && (!threads.count(e.tid()) || !processes.count(e.pid()))) ++unnamed;
    // Events recorded since the window opened, none older: an interval may
    // begin earlier, but it ends within the window (a second's slack for
    // the agent's buffering).
    if (EventEndNs(e) + 1'000'000'000 < w.start_ns()) ++before_window;
  }
  EXPECT_EQ(unnamed, 0u) << "events whose thread or process the dump does not name";
  EXPECT_EQ(before_window, 0u) << "events from before the window";

  rt::RunResult text = rt::Run({rt::TracerPath(), "report", path});
  EXPECT_EQ(text.exit_code, 0) << text.Describe();
  std::vector<std::string> lines = absl::StrSplit(text.out, '\n');
  ASSERT_GE(lines.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(lines[1], "  WINDOW:    flight-recorder window")) << text.out.substr(0, 400);
  rt::RunResult json = rt::Run({rt::TracerPath(), "report", path, "--format", "json"});
  EXPECT_EQ(json.exit_code, 0) << json.Describe();
  EXPECT_TRUE(absl::StrContains(json.out, "\"flight_window\": {")) << json.out.substr(0, 600);
  rt::RunResult exported = rt::Run({rt::TracerPath(), "export", path, "-o", path + ".pftrace"});
  EXPECT_EQ(exported.exit_code, 0) << exported.Describe();
  EXPECT_TRUE(absl::StartsWith(exported.err, "gpuos-trace: NOTE: " + path + " is a flight-recorder window"))
      << exported.err;
}

TEST(FlightRecorder, LaunchedRunDumpedOnSignalOnCtlAndAtTheEnd) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("run.gpuos");
  const std::string ring = trace + ".flight";
  const std::string job_report = dir.File("job.txt");
  // Megabytes of events (mmaps, futex calls), then some seconds of sleeps.
  rt::Child tracer = rt::Child::Start(
      {rt::TracerPath(), "-o", trace, "--flight-recorder", "256K", "--", rt::WorkloadPath("ground_truth"),
       "--threads", "4", "--workers", "1", "--mmaps", "4000", "--futex-waits", "800", "--futex-wakes", "800",
       "--sleeps", "400", "--sleep-us", "10000", "--report", job_report});

  // The ring has turned over (more than its 8 segments were written).
  ASSERT_TRUE(rt::WaitUntil([&] { return NewestSegment(ring) >= 10; }, 30)) << "the ring never rotated";
  tracer.Signal(SIGUSR1);
  const std::string first = dir.File("run.dump-1.gpuos");
  ASSERT_TRUE(rt::WaitUntil([&] { return rt::ReadFile(first).has_value(); }, 20)) << "no dump after SIGUSR1";

  // ctl with the job's pid: the recorder is found among its ancestors.
  std::vector<pid_t> children = rt::ChildrenOf(tracer.pid());
  ASSERT_FALSE(children.empty());
  rt::RunResult ctl = rt::Run({rt::TracerPath(), "ctl", "--pid", std::to_string(children.front()), "dump"});
  EXPECT_EQ(ctl.exit_code, 0) << ctl.Describe();
  const std::string second = dir.File("run.dump-2.gpuos");
  EXPECT_EQ(ctl.out, second + "\n");

  // A process no flight recorder runs: one clear line, no signal sent.
  rt::RunResult stranger = rt::Run({rt::TracerPath(), "ctl", "--pid", std::to_string(getpid()), "dump"});
  EXPECT_EQ(stranger.exit_code, 1) << stranger.Describe();
  EXPECT_TRUE(absl::StrContains(stranger.err, "is not a gpuos-trace --flight-recorder")) << stranger.err;

  rt::RunResult r = tracer.Wait(120);
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_FALSE(rt::ReadGroundTruthReport(job_report).empty()) << "the job did not finish";
  EXPECT_TRUE(absl::StrContains(r.err, "(SIGUSR1 from pid")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "(gpuos-trace ctl dump (pid")) << r.err;
  EXPECT_FALSE(rt::ReadFile(ring + "/seg-000000.gpuos").has_value()) << "the ring outlived the recording";

  CheckWindow(first, /*expect_rotation=*/true);
  CheckWindow(second, /*expect_rotation=*/true);
  CheckWindow(trace, /*expect_rotation=*/true);
  auto final_trace = rt::ReadTrace(trace);
  ASSERT_TRUE(final_trace.ok());
  EXPECT_TRUE(final_trace->trailer.root_exited());
  EXPECT_EQ(final_trace->header.flight_window().dump_index(), 3u);
  EXPECT_TRUE(absl::StartsWith(final_trace->header.flight_window().reason(), "the end of the recording"));
  // No window starts before the one written earlier (the ring only moves
  // on), and each ends later.
  auto first_trace = rt::ReadTrace(first);
  auto second_trace = rt::ReadTrace(second);
  ASSERT_TRUE(first_trace.ok() && second_trace.ok());
  EXPECT_GE(second_trace->header.flight_window().start_ns(), first_trace->header.flight_window().start_ns());
  EXPECT_GE(final_trace->header.flight_window().start_ns(), second_trace->header.flight_window().start_ns());
  EXPECT_GE(second_trace->header.flight_window().end_ns(), first_trace->header.flight_window().end_ns());
  EXPECT_GT(final_trace->header.flight_window().end_ns(), second_trace->header.flight_window().end_ns());
  // The job's last events are in it: the root process's exit.
  bool root_exit = false;
  for (const v1::Event& e : final_trace->events) {
    root_exit |= e.has_process_exit() && e.pid() == final_trace->header.root_pid();
  }
  EXPECT_TRUE(root_exit);
}

// --flight-trigger slow-step=3x on a PyTorch script without annotations: the
// Python hook's optimizer.step ranges give the steps, and the one step that
// sleeps a second is caught with a dump of its own.  Needs python3 with torch.
TEST(FlightRecorder, ASlowStepTriggersADump) {
  GPUOS_REQUIRE_ROOT();
  if (rt::Run({"/usr/bin/python3", "-c", "import torch"}).exit_code != 0) GTEST_SKIP() << "no python3 with torch";
  rt::TempDir dir;
  const std::string script = dir.File("train.py");
  ASSERT_TRUE(rt::WriteFile(script, R"(
import time, torch
model = torch.nn.Linear(10, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(20, 10), torch.randn(20, 1)
for step in range(40):
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    time.sleep(1.0 if step == 30 else 0.02)
    opt.step()
)"));
  const std::string trace = dir.File("run.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "-o", trace, "--flight-recorder", "1M", "--flight-trigger",
                             "slow-step=3x", "--", "/usr/bin/python3", script},
                            {.timeout_s = 120});
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  // Exactly one dump besides the end's: the step before the 31st
  // optimizer.step took about 50 times the median.
  const std::string dump = dir.File("run.dump-1.gpuos");
  EXPECT_FALSE(rt::ReadFile(dir.File("run.dump-2.gpuos")).has_value()) << r.err;
  auto trace_of_dump = rt::ReadTrace(dump);
  ASSERT_TRUE(trace_of_dump.ok()) << trace_of_dump.status() << "\n" << r.err;
  EXPECT_TRUE(absl::StartsWith(trace_of_dump->header.flight_window().reason(), "slow step:"))
      << trace_of_dump->header.flight_window().reason();
  // The slow step is in the dump: its optimizer.step, about a second after
  // the one before.
  std::vector<uint64_t> steps;
  for (const v1::Event& e : trace_of_dump->events) {
    if (e.has_nvtx_range() && e.nvtx_range().name() == "optimizer.step") steps.push_back(e.ts_ns());
  }
  ASSERT_GE(steps.size(), 2u);
  EXPECT_GT(steps.back() - steps[steps.size() - 2], 900'000'000u);
  rt::RunResult text = rt::Run({rt::TracerPath(), "report", dump});
  EXPECT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_TRUE(absl::StrContains(text.out, "dumped by: slow step:")) << text.out.substr(0, 600);
}

}  // namespace
}  // namespace gpuos
