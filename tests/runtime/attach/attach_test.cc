// `gpuos-trace --pid`: attaching to a job that is already running
// (tests/workloads/attach_target.cc, one known mmap+munmap per ms) and
// detaching from it.  Checked against what the job itself logged:
//  - the trace holds exactly the operations made inside the attach window
//    (header attach.start_ns .. trailer attach_end_ns), none from outside;
//  - worker processes forked after the attach are followed;
//  - after detach no BPF program or link of ours is left in the kernel and
//    the job runs as fast as before the attach;
//  - bad targets get a clear one-line error.
// Needs root (eBPF).
#include <bpf/bpf.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

constexpr uint64_t kOpBytes = 7 * 4096;  // attach_target's operation size

struct LoggedOp {
  pid_t pid;
  std::string call;
  uint64_t start;
  uint64_t end;
};

struct TargetLog {
  std::vector<LoggedOp> ops;
  std::vector<std::pair<uint64_t, uint64_t>> rates;  // window start, getppid calls
  std::vector<pid_t> workers;
};

TargetLog ReadTargetLog(const std::string& path) {
  TargetLog log;
  std::ifstream in(path);
  std::string kind;
  while (in >> kind) {
    if (kind == "op") {
      LoggedOp op;
      in >> op.pid >> op.call >> op.start >> op.end;
      log.ops.push_back(op);
    } else if (kind == "rate") {
      uint64_t start, calls;
      in >> start >> calls;
      log.rates.emplace_back(start, calls);
    } else if (kind == "worker") {
      pid_t pid;
      in >> pid;
      log.workers.push_back(pid);
    }
  }
  return log;
}

// The BPF objects a process holds, by kind ("prog", "link", "map"), read
// from its file descriptors' fdinfo (prog_id:, link_id:, map_id:).  Other
// tests may load programs meanwhile; these ids are gpuos-trace's own.
std::map<std::string, std::set<uint32_t>> BpfObjectsOf(pid_t pid) {
  std::map<std::string, std::set<uint32_t>> out;
  for (int fd = 0; fd < 4096; ++fd) {
    auto info = rt::ReadFile(absl::StrCat("/proc/", pid, "/fdinfo/", fd));
    if (!info) continue;
    std::istringstream lines(*info);
    std::string line;
    while (std::getline(lines, line)) {
      for (const char* kind : {"prog", "link", "map"}) {
        std::string key = absl::StrCat(kind, "_id:");
        if (absl::StartsWith(line, key)) out[kind].insert(std::stoul(line.substr(key.size())));
      }
    }
  }
  return out;
}

// Whether the kernel still has a BPF object of that kind and id.
bool BpfObjectExists(const std::string& kind, uint32_t id) {
  int fd = kind == "prog"   ? bpf_prog_get_fd_by_id(id)
           : kind == "link" ? bpf_link_get_fd_by_id(id)
                            : bpf_map_get_fd_by_id(id);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

// The job's speed (getppid calls per 100 ms window) over windows that lie
// entirely within [from, to).
std::vector<double> WindowRates(const TargetLog& log, uint64_t from, uint64_t to) {
  std::vector<double> rates;
  for (const auto& [start, calls] : log.rates) {
    if (start >= from && start + 100'000'000 <= to) rates.push_back(static_cast<double>(calls));
  }
  return rates;
}

// The speed the job reaches in its good windows (the 80th percentile):
// what another process on this 2-core machine takes away comes and goes,
// so it lowers some windows; a tracer left behind lowers all of them.
double ReachedRate(const TargetLog& log, uint64_t from, uint64_t to) {
  std::vector<double> rates = WindowRates(log, from, to);
  if (rates.empty()) return 0;
  std::sort(rates.begin(), rates.end());
  return rates[(rates.size() - 1) * 4 / 5];
}

struct Window {
  uint64_t start = 0;
  uint64_t end = 0;
};

Window AttachWindow(const rt::TraceContents& trace) {
  return {trace.header.attach().start_ns(), trace.trailer.attach_end_ns()};
}

// (call, start) of every traced mmap/munmap of kOpBytes by `pid`.
std::multiset<std::pair<std::string, uint64_t>> TracedOps(const rt::TraceContents& trace, pid_t pid) {
  std::multiset<std::pair<std::string, uint64_t>> out;
  for (const v1::Event& e : trace.events) {
    if (static_cast<pid_t>(e.pid()) != pid) continue;
    if (e.has_mmap() && e.mmap().length() == kOpBytes && e.mmap().result() > 0) {
      out.insert({"mmap", e.ts_ns()});
    } else if (e.has_munmap() && e.munmap().length() == kOpBytes) {
      out.insert({"munmap", e.ts_ns()});
    }
  }
  return out;
}

// The traced operation that is logged operation `op` (the same call, its
// traced start within the logged [start, end]), or traced.end().
std::multiset<std::pair<std::string, uint64_t>>::iterator FindTraced(
    std::multiset<std::pair<std::string, uint64_t>>& traced, const LoggedOp& op) {
  auto lo = traced.lower_bound({op.call, op.start});
  return lo != traced.end() && lo->first == op.call && lo->second <= op.end ? lo : traced.end();
}

// Compares the logged operations of `pid` with the traced ones: every call
// that started and ended inside the window is traced, nothing that ended
// before it or started after it is.  A call straddling an edge may go
// either way (the kernel saw only half of it).  The logged start is taken
// just before the syscall and the traced start just after entry, so they
// differ by the few microseconds of the call's entry path.
void ExpectExactWindow(const TargetLog& log, const rt::TraceContents& trace, pid_t pid,
                       size_t* inside_count) {
  const Window w = AttachWindow(trace);
  auto traced = TracedOps(trace, pid);
  size_t inside = 0, outside_traced = 0, inside_missing = 0;
  for (const LoggedOp& op : log.ops) {
    if (op.pid != pid) continue;
    auto match = FindTraced(traced, op);
    const bool found = match != traced.end();
    if (found) traced.erase(match);
    if (op.start >= w.start && op.end <= w.end) {
      ++inside;
      if (!found) ++inside_missing;
    } else if (op.end < w.start || op.start > w.end) {
      if (found) ++outside_traced;
    }
  }
  EXPECT_EQ(inside_missing, 0u) << "operations inside the attach window missing from the trace";
  EXPECT_EQ(outside_traced, 0u) << "operations outside the attach window in the trace";
  EXPECT_TRUE(traced.empty()) << traced.size() << " traced operations the job never logged";
  *inside_count = inside;
}

rt::Child StartTarget(const rt::TempDir& dir, const std::string& log) {
  return rt::Child::Start({rt::WorkloadPath("attach_target"), "--log", dir.File(log), "--seconds", "60"});
}

TEST(Attach, CountsCoverExactlyTheAttachWindow) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  rt::Child target = StartTarget(dir, "ops.log");
  usleep(400'000);  // operations before the attach: must not be in the trace
  const std::string trace_path = dir.File("attach.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--no-cuda", "--pid",
                             std::to_string(target.pid()), "--duration", "1s", "-o", trace_path});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(r.ErrorLines().empty()) << r.err;
  usleep(300'000);  // and after the detach
  target.Signal(SIGTERM);
  ASSERT_EQ(target.Wait(30).exit_code, 0);

  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(trace->status.ok()) << trace->status;
  ASSERT_TRUE(trace->has_trailer);
  ASSERT_TRUE(trace->header.has_attach());
  EXPECT_EQ(trace->header.attach().target_pids_size(), 1);
  EXPECT_EQ(trace->header.root_pid(), 0u);
  const Window w = AttachWindow(*trace);
  ASSERT_GT(w.end, w.start);
  // --duration 1s, give or take a tick of the loop.
  EXPECT_NEAR((w.end - w.start) / 1e9, 1.0, 0.15);

  TargetLog log = ReadTargetLog(dir.File("ops.log"));
  size_t inside = 0;
  ExpectExactWindow(log, *trace, target.pid(), &inside);
  // One operation (two calls) per ms for about a second.
  EXPECT_GT(inside, 2 * 800u);

  // The job and its threads were listed as already running.
  bool process_listed = false;
  int threads_listed = 0;
  for (const v1::Event& e : trace->events) {
    if (e.has_process_start() && static_cast<pid_t>(e.pid()) == target.pid()) {
      process_listed = e.process_start().preexisting();
      EXPECT_EQ(e.ts_ns(), w.start);
    }
    if (e.has_thread_start() && static_cast<pid_t>(e.pid()) == target.pid() &&
        e.thread_start().preexisting()) {
      ++threads_listed;
    }
  }
  EXPECT_TRUE(process_listed);
  EXPECT_EQ(threads_listed, 1);  // the rate counter thread
  // Nothing of the trace lies outside the window (kernel totals are stamped
  // when read, at most a tick after the end; a process or thread born in the
  // microseconds before the window opened would keep its start).
  for (const v1::Event& e : trace->events) {
    if (e.has_syscall_stats() || e.has_tracer_stats() || e.has_futex_wakes()) continue;
    if (e.has_process_start() || e.has_thread_start()) continue;
    EXPECT_GE(e.ts_ns(), w.start);
    EXPECT_LE(e.ts_ns(), w.end);
  }
}

TEST(Attach, SeveralPidsAreTracedTogether) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  rt::Child first = StartTarget(dir, "first.log");
  rt::Child second = StartTarget(dir, "second.log");
  usleep(300'000);
  const std::string trace_path = dir.File("attach.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--no-cuda", "--pid", std::to_string(first.pid()),
                             "--pid", std::to_string(second.pid()), "--duration", "1s", "-o", trace_path});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  usleep(200'000);
  first.Signal(SIGTERM);
  second.Signal(SIGTERM);
  ASSERT_EQ(first.Wait(30).exit_code, 0);
  ASSERT_EQ(second.Wait(30).exit_code, 0);
  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->header.attach().target_pids_size(), 2);
  size_t inside = 0;
  ExpectExactWindow(ReadTargetLog(dir.File("first.log")), *trace, first.pid(), &inside);
  EXPECT_GT(inside, 2 * 800u);
  ExpectExactWindow(ReadTargetLog(dir.File("second.log")), *trace, second.pid(), &inside);
  EXPECT_GT(inside, 2 * 800u);
}

// The benchmark knob GPUOS_BENCH_TOGGLE (bench/phase_overhead.py) takes the
// job out of the traced set and back: operations of its "on" spans are in
// the trace, those of its "off" spans are not.  A call within 2 ms of a flip
// may go either way (the flip's time is read just before the bit changes).
TEST(Attach, BenchToggleTracesTheJobOnlyInItsOnSpans) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  rt::Child target = StartTarget(dir, "ops.log");
  usleep(300'000);
  const std::string trace_path = dir.File("attach.gpuos");
  rt::RunOptions options;
  options.env = {"GPUOS_BENCH_TOGGLE=150:" + dir.File("toggle.log")};
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--no-cuda", "--pid", std::to_string(target.pid()),
                             "--duration", "1500ms", "-o", trace_path},
                            options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "GPUOS_BENCH_TOGGLE")) << "the knob warns that events are missing";
  target.Signal(SIGTERM);
  ASSERT_EQ(target.Wait(30).exit_code, 0);
  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();

  // Flips: "on" first, then alternating, in time order; the last span ends
  // with the attach.
  std::vector<std::pair<std::string, uint64_t>> flips;
  std::ifstream in(dir.File("toggle.log"));
  std::string kind;
  uint64_t ns;
  while (in >> kind >> ns) flips.emplace_back(kind, ns);
  ASSERT_GE(flips.size(), 6u) << "a flip every 150-200 ms (the session's 50 ms tick) for 1.5 s";
  for (size_t i = 0; i < flips.size(); ++i) {
    EXPECT_EQ(flips[i].first, i % 2 == 0 ? "on" : "off") << "flip " << i;
    if (i > 0) EXPECT_GT(flips[i].second, flips[i - 1].second) << "flip " << i;
  }
  flips.emplace_back("end", AttachWindow(*trace).end);

  constexpr uint64_t kSlack = 2'000'000;
  auto traced = TracedOps(*trace, target.pid());
  size_t on_ops = 0, on_missing = 0, off_ops = 0, off_traced = 0;
  for (const LoggedOp& op : ReadTargetLog(dir.File("ops.log")).ops) {
    const bool found = FindTraced(traced, op) != traced.end();
    for (size_t i = 0; i + 1 < flips.size(); ++i) {
      if (op.start < flips[i].second + kSlack || op.end + kSlack > flips[i + 1].second) continue;
      if (flips[i].first == "on") {
        ++on_ops;
        on_missing += !found;
      } else {
        ++off_ops;
        off_traced += found;
      }
    }
  }
  EXPECT_GT(on_ops, 500u);
  EXPECT_GT(off_ops, 500u);
  EXPECT_EQ(on_missing, 0u) << "operations of the on spans missing from the trace";
  EXPECT_EQ(off_traced, 0u) << "operations of the off spans in the trace";
}

TEST(Attach, WorkersForkedAfterTheAttachAreFollowed) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  rt::Child target = StartTarget(dir, "ops.log");
  usleep(200'000);
  const std::string trace_path = dir.File("attach.gpuos");
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "-q", "--no-cuda", "--pid",
                                       std::to_string(target.pid()), "--duration", "2s", "-o",
                                       trace_path});
  // Once the tracer writes its file the targets are tracked (the header
  // comes after the attach start is taken, tracking right after).
  ASSERT_TRUE(rt::WaitUntil([&] { return rt::ReadFile(trace_path).value_or("").size() > 200; }, 20));
  usleep(300'000);
  target.Signal(SIGUSR1);  // two workers, 50 operations each
  rt::RunResult r = tracer.Wait(30);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  target.Signal(SIGTERM);
  ASSERT_EQ(target.Wait(30).exit_code, 0);

  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  TargetLog log = ReadTargetLog(dir.File("ops.log"));
  ASSERT_EQ(log.workers.size(), 2u);
  for (pid_t worker : log.workers) {
    SCOPED_TRACE(absl::StrCat("worker ", worker));
    bool started = false;
    for (const v1::Event& e : trace->events) {
      if (e.has_process_start() && static_cast<pid_t>(e.pid()) == worker) {
        started = true;
        EXPECT_EQ(static_cast<pid_t>(e.process_start().ppid()), target.pid());
        EXPECT_FALSE(e.process_start().preexisting());
      }
    }
    EXPECT_TRUE(started);
    TargetLog worker_log = ReadTargetLog(dir.File(absl::StrCat("ops.log.", worker)));
    ASSERT_EQ(worker_log.ops.size(), 100u);
    auto traced = TracedOps(*trace, worker);
    EXPECT_EQ(traced.size(), 100u);  // every call: the worker lived inside the window
  }
}

// How many BPF programs named handle_sys_enter (gpuos-trace's) are loaded.
int SyscallProgramsLoaded() {
  int n = 0;
  uint32_t id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    struct bpf_prog_info info {};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
        absl::StartsWith(info.name, "handle_sys_ent")) {
      ++n;
    }
    close(fd);
  }
  return n;
}

// A thread's last mmap/munmap calls wait in its slot until it blocks or
// its batch fills (bpf/mm.h); one that never blocks again still has them
// there when an attached tracer stops, which must read them out.
TEST(Attach, CallsStillHeldInTheKernelAtTheEndAreRecorded) {
  GPUOS_REQUIRE_ROOT();
  constexpr int kPairs = 3;
  constexpr uint64_t kBytes = 11 * 4096;
  rt::TempDir dir;
  rt::Child target = rt::Child::Start({rt::WorkloadPath("mm_then_spin"), "--pairs",
                                       absl::StrCat(kPairs), "--bytes", absl::StrCat(kBytes)});
  usleep(200'000);
  const std::string trace_path = dir.File("attach.gpuos");
  const int loaded_before = SyscallProgramsLoaded();
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "-q", "--no-cuda", "--pid",
                                       std::to_string(target.pid()), "--duration", "2s", "-o",
                                       trace_path});
  // The tracer tracks the target right after attaching the programs it
  // loads (its file's header comes earlier, before the load).
  ASSERT_TRUE(rt::WaitUntil([&] { return SyscallProgramsLoaded() > loaded_before; }, 20));
  usleep(500'000);
  target.Signal(SIGUSR1);
  rt::RunResult r = tracer.Wait(30);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  target.Signal(SIGTERM);
  ASSERT_EQ(target.Wait(30).exit_code, 0);

  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  int mmaps = 0, munmaps = 0;
  for (const v1::Event& e : trace->events) {
    if (static_cast<pid_t>(e.tid()) != target.pid()) continue;
    if (e.has_mmap() && e.mmap().length() == kBytes) {
      ++mmaps;
      EXPECT_GT(e.mmap().result(), 0);
    }
    if (e.has_munmap() && e.munmap().length() == kBytes) {
      ++munmaps;
      EXPECT_EQ(e.munmap().result(), 0);
    }
  }
  EXPECT_EQ(mmaps, kPairs);
  EXPECT_EQ(munmaps, kPairs);
}

TEST(Attach, DetachLeavesNothingBehindAndTheJobAtFullSpeed) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  rt::Child target = StartTarget(dir, "ops.log");
  usleep(1'500'000);  // the job's speed before
  // Before the tracer starts: loading and verifying its programs takes a
  // CPU of this 2-core machine for a while, which is not tracing cost.
  const auto tracer_start_ns = static_cast<uint64_t>(rt::MonotonicSeconds() * 1e9);
  const std::string trace_path = dir.File("attach.gpuos");
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "-q", "--no-cuda", "--pid",
                                       std::to_string(target.pid()), "-o", trace_path});
  ASSERT_TRUE(rt::WaitUntil([&] { return rt::ReadFile(trace_path).value_or("").size() > 200; }, 20));
  usleep(1'000'000);
  // While attached, our programs, links and maps are in the kernel.
  const std::map<std::string, std::set<uint32_t>> ours = BpfObjectsOf(tracer.pid());
  for (const char* kind : {"prog", "link", "map"}) {
    ASSERT_TRUE(ours.count(kind)) << "gpuos-trace holds no BPF " << kind;
  }
  EXPECT_GE(ours.at("prog").size(), 6u);
  tracer.Signal(SIGINT);  // Ctrl-C detaches
  rt::RunResult r = tracer.Wait(30);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  // The kernel frees an unreferenced map from a work queue after an RCU
  // grace period, so give it a moment.
  for (const auto& [kind, ids] : ours) {
    for (uint32_t id : ids) {
      EXPECT_TRUE(rt::WaitUntil([&] { return !BpfObjectExists(kind, id); }, 5))
          << kind << " " << id << " left after detach";
    }
  }
  usleep(1'500'000);  // the job's speed after
  target.Signal(SIGTERM);
  ASSERT_EQ(target.Wait(30).exit_code, 0);

  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(trace->has_trailer);
  const Window w = AttachWindow(*trace);
  TargetLog log = ReadTargetLog(dir.File("ops.log"));
  ASSERT_FALSE(log.rates.empty());
  const uint64_t job_start = log.rates.front().first;
  const double before =
      ReachedRate(log, job_start + 200'000'000, std::min(tracer_start_ns, w.start));
  const double during = ReachedRate(log, w.start, w.end);
  const double after = ReachedRate(log, w.end + 100'000'000, UINT64_MAX);
  RecordProperty("rate_before", std::to_string(before));
  RecordProperty("rate_during", std::to_string(during));
  RecordProperty("rate_after", std::to_string(after));
  ASSERT_GT(before, 0);
  ASSERT_GT(after, 0);
  // 80th percentiles of 100 ms windows: after detaching, the job is at
  // least 85% as fast as before (faster is no fault: the machine is
  // shared).  While attached every getppid() pays for the syscall programs,
  // which this measure is sensitive enough to show (the last check).
  EXPECT_GE(after / before, 0.85)
      << "getppid/100ms before " << before << ", during " << during << ", after " << after;
  EXPECT_LT(during, before) << "the speed measure does not see tracing at all";
}

TEST(Attach, BadTargetsGetAClearError) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  struct Case {
    std::vector<std::string> argv;
    std::string message;
  };
  const std::string out = dir.File("x.gpuos");
  const std::string tracer = rt::TracerPath();
  for (const Case& c : std::vector<Case>{
           {{tracer, "--pid", "999999999", "-o", out}, "--pid 999999999: no such process"},
           {{tracer, "--pid", "2", "-o", out}, "is a kernel thread"},
           // The shell execs gpuos-trace: $$ is then gpuos-trace's own pid.
           {{"/bin/sh", "-c", "exec \"$0\" --pid $$ -o \"$1\"", tracer, out}, "that is gpuos-trace itself"},
           {{tracer, "--pid", "abc", "-o", out}, "--pid abc: expected a process id"},
           {{tracer, "--pid", "1", "--", "/bin/true"}, "not both"},
           // No GPU here: nothing holds a GPU context.
           {{tracer, "--gpu-procs", "-o", out}, "no process holds a GPU context"},
       }) {
    SCOPED_TRACE(c.argv.back());
    rt::RunResult r = rt::Run(c.argv);
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    std::vector<std::string> lines = r.ErrorLines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_TRUE(absl::StrContains(lines[0], c.message)) << lines[0];
    EXPECT_NE(access(out.c_str(), F_OK), 0) << "a failed attach left a file";
  }
}

}  // namespace
}  // namespace gpuos
