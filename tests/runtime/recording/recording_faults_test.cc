// Faults a days-long recording meets, with the real gpuos-trace, real eBPF
// and the shim (issue 20, point 4); each checks that the traced job is not
// hurt and that the tracer notices and says so.  (A full file system and
// --max-size: trace_write_failure_test.cc; SIGKILL of the tracer:
// damaged_trace_test.cc and tracer_lifecycle_test.cc; a hostile peer on a
// shim's control socket: shim_control_server_test.cc.)
//  - the trace file removed mid-recording: the tracer stops writing into
//    the unreachable file, the job runs to its end, and stderr says so;
//  - the tracer stopped (SIGSTOP) for seconds: the job's own step rate
//    holds meanwhile, and the ring-buffer records lost are counted in the
//    trace's dropped_events;
//  - a process name cut inside a UTF-8 character (the kernel keeps 15
//    bytes) leaves a trace that reads to its end;
//  - hostile clients on the agent's shim socket: another uid cannot
//    connect, a process outside the traced tree is refused, garbage from
//    inside it is discarded and counted, a client that connects and never
//    sends or reads holds nothing up, and every NVTX range the job made is
//    in the trace.
// Needs root (eBPF, setuid).
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "analysis/os_summary.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

const std::string kShim = std::filesystem::path(GPUOS_TRACE_BIN).parent_path() / "libgpuos_shim.so";

struct Window {
  uint64_t start_ns, end_ns, steps;
};
struct JobLog {
  std::vector<Window> windows;
  uint64_t total = 0;
};

// nvtx_rate_loop's log.
JobLog ReadJobLog(const std::string& path) {
  JobLog log;
  for (absl::string_view line : absl::StrSplit(rt::ReadFile(path).value_or(""), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    Window w{};
    if (f.size() == 4 && f[0] == "window" && absl::SimpleAtoi(f[1], &w.start_ns) &&
        absl::SimpleAtoi(f[2], &w.end_ns) && absl::SimpleAtoi(f[3], &w.steps)) {
      log.windows.push_back(w);
    } else if (f.size() == 2 && f[0] == "total") {
      (void)absl::SimpleAtoi(f[1], &log.total);
    }
  }
  return log;
}

uint64_t NowNs() { return static_cast<uint64_t>(rt::MonotonicSeconds() * 1e9); }

// The first child of `tracer` running `comm`, or -1.
pid_t WaitForCommand(pid_t tracer, const std::string& comm) {
  pid_t found = -1;
  rt::WaitUntil(
      [&] {
        for (pid_t child : rt::ChildrenOf(tracer)) {
          if (rt::CommOf(child) == comm) found = child;
        }
        return found > 0;
      },
      30);
  return found;
}

// Size of the file `pid` holds open under the (removed) path `path`; -1 if none.
int64_t OpenFileSize(pid_t pid, const std::string& path) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(fds, ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
    if (target == path + " (deleted)") {
      struct stat st {};
      if (stat(entry.path().c_str(), &st) == 0) return st.st_size;
    }
  }
  return -1;
}

TEST(RecordingFaults, TraceFileRemovedWhileRecordingStopsWritingAndSaysSo) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("run.gpuos");
  const std::string job_log = dir.File("job.txt");
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "-q", "-o", trace, "--", rt::WorkloadPath("nvtx_rate_loop"),
                                       "--log", job_log, "--seconds", "7"});
  ASSERT_GT(WaitForCommand(tracer.pid(), "nvtx_rate_loop"), 0) << "the job never started";
  // Let a few batches reach the file, then remove it under the tracer.
  ASSERT_TRUE(rt::WaitUntil(
      [&] {
        struct stat st {};
        return stat(trace.c_str(), &st) == 0 && st.st_size > 64 * 1024;
      },
      10));
  ASSERT_EQ(unlink(trace.c_str()), 0);
  // The tracer notices at its next flush (at least one a second) and
  // writes no more, while the job goes on making events.
  usleep(1500 * 1000);
  const int64_t size_then = OpenFileSize(tracer.pid(), trace);
  usleep(1500 * 1000);
  const int64_t size_later = OpenFileSize(tracer.pid(), trace);
  EXPECT_GT(size_then, 0);
  EXPECT_EQ(size_later, size_then) << "the tracer kept writing into the removed file";

  rt::RunResult r = tracer.Wait(60);
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  const JobLog job = ReadJobLog(job_log);
  EXPECT_GT(job.total, 0u) << "the job did not finish its log";
  EXPECT_TRUE(absl::StrContains(r.err, trace + " was removed while recording")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "nothing of the trace remains")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST(RecordingFaults, StoppedTracerNeitherSlowsTheJobNorHidesItsLosses) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("run.gpuos");
  const std::string job_log = dir.File("job.txt");
  // A small ring buffer, so that seconds without a reader overflow it.
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "-q", "--buffer-size", "64K", "-o", trace, "--",
                                       rt::WorkloadPath("nvtx_rate_loop"), "--log", job_log, "--seconds", "7",
                                       "--window-ms", "250"});
  ASSERT_GT(WaitForCommand(tracer.pid(), "nvtx_rate_loop"), 0) << "the job never started";
  usleep(2000 * 1000);
  const uint64_t stopped_ns = NowNs();
  ASSERT_EQ(kill(tracer.pid(), SIGSTOP), 0);
  usleep(3000 * 1000);
  const uint64_t continued_ns = NowNs();
  ASSERT_EQ(kill(tracer.pid(), SIGCONT), 0);
  rt::RunResult r = tracer.Wait(60);
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 0) << r.Describe();

  // The job's own rate: windows wholly inside the stop against windows
  // wholly outside it (the first second, start-up, left out).
  const JobLog job = ReadJobLog(job_log);
  ASSERT_GT(job.windows.size(), 20u);
  std::vector<double> during, outside;
  const uint64_t settled = job.windows.front().start_ns + 1'000'000'000;
  for (const Window& w : job.windows) {
    if (w.start_ns >= stopped_ns && w.end_ns <= continued_ns) {
      during.push_back(static_cast<double>(w.steps));
    } else if (w.start_ns >= settled && (w.end_ns <= stopped_ns || w.start_ns >= continued_ns)) {
      outside.push_back(static_cast<double>(w.steps));
    }
  }
  ASSERT_GE(during.size(), 8u);
  ASSERT_GE(outside.size(), 8u);
  std::sort(during.begin(), during.end());
  std::sort(outside.begin(), outside.end());
  const double during_median = during[during.size() / 2], outside_median = outside[outside.size() / 2];
  std::cout << "steps per 250 ms, median: " << during_median << " while the tracer was stopped, " << outside_median
            << " otherwise\n";
  // A tracer that held the job up (a blocking send, a full socket) would
  // take most of its rate; the rest is this shared machine's noise.
  EXPECT_GE(during_median, 0.7 * outside_median)
      << "steps per 250 ms while the tracer was stopped: " << during_median << ", otherwise " << outside_median;

  auto summary = SummarizeTraceFile(trace);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->has_trailer);
  EXPECT_GT(summary->dropped_events, 0u) << "3 s without a reader on a 64 KiB ring buffer lost nothing?";
  uint64_t by_reason = 0;
  for (const auto& [reason, n] : summary->drops_by_reason) by_reason += n;
  EXPECT_EQ(by_reason, summary->dropped_events);
}

// A process that names itself in UTF-8 gets its name cut at 15 bytes by the
// kernel, often inside a character.  Written as it is, such a name makes the
// batch it is in, and every record after it, unreadable ("does not parse as
// a record"): proto3 refuses strings that are not UTF-8.
TEST(RecordingFaults, ANameCutInsideACharacterLeavesAWholeTrace) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("run.gpuos");
  // "a" and four 3-byte characters, then two bytes of a fifth.
  const std::string script =
      "printf 'a\\346\\225\\260\\346\\215\\256\\345\\212\\240\\350\\275\\275\\345\\231\\250' "
      "> /proc/self/comm; /bin/sleep 0.2";
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--run-as-root", "-o", trace, "--", "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_FALSE(absl::StrContains(r.err, "invalid UTF-8")) << r.err;
  auto contents = rt::ReadTrace(trace);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_TRUE(contents->status.ok()) << contents->status;
  EXPECT_TRUE(contents->has_trailer);
  bool renamed = false;
  for (const v1::Event& e : contents->events) {
    renamed |= e.has_comm_change() && absl::StartsWith(e.comm_change().new_comm(), "a\xE6\x95\xB0") &&
               absl::EndsWith(e.comm_change().new_comm(), "\xEF\xBF\xBD");
  }
  EXPECT_TRUE(renamed) << "no rename to the cut name, repaired";
  rt::RunResult report = rt::Run({rt::TracerPath(), "report", trace});
  EXPECT_EQ(report.exit_code, 0) << report.Describe();
}

// Connects to the SOCK_SEQPACKET socket at `path`; -1 with errno set.
int ConnectTo(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// GPUOS_SHIM_SOCKET from the environment of `pid`.
std::string ShimSocketOf(pid_t pid) {
  const std::string environ = rt::ReadFile("/proc/" + std::to_string(pid) + "/environ").value_or("");
  for (absl::string_view entry : absl::StrSplit(environ, '\0')) {
    if (absl::ConsumePrefix(&entry, "GPUOS_SHIM_SOCKET=")) return std::string(entry);
  }
  return "";
}

TEST(RecordingFaults, HostileClientsOnTheShimSocketChangeNothing) {
  GPUOS_REQUIRE_ROOT();
  if (access(kShim.c_str(), R_OK) != 0) GTEST_SKIP() << "shim not built (no NVTX headers)";
  rt::TempDir dir;
  const std::string trace = dir.File("run.gpuos");
  const std::string job_log = dir.File("job.txt");
  // Inside the traced tree, beside the job: a client that sends three
  // messages of garbage and then holds its connection open, silent, until
  // the job is done.
  const std::string hostile =
      "import os, socket, time\n"
      "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
      "s.connect(os.environ['GPUOS_SHIM_SOCKET'])\n"
      "for junk in (b'\\xff' * 64, b'\\x0a\\x05\\x08\\x01', os.urandom(4096) + b'\\x80'):\n"
      "    s.send(junk)\n"
      "open(os.environ['HOSTILE_READY'], 'w').close()\n"
      "time.sleep(600)\n";
  ASSERT_TRUE(rt::WriteFile(dir.File("hostile.py"), hostile));
  const std::string ready = dir.File("hostile.ready");
  const std::string script = "/usr/bin/python3 " + dir.File("hostile.py") + " & " + rt::WorkloadPath("nvtx_rate_loop") +
                             " --log " + job_log + " --seconds 4; kill $!; wait";
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "--run-as-root", "-o", trace, "--", "/bin/sh", "-c", script},
                                      {.env = {"HOSTILE_READY=" + ready}});
  const pid_t job = WaitForCommand(tracer.pid(), "sh");
  ASSERT_GT(job, 0);
  std::string socket_path;
  ASSERT_TRUE(rt::WaitUntil([&] { return !(socket_path = ShimSocketOf(job)).empty(); }, 10));

  // Another user cannot even reach the socket (its directory is 0700).
  pid_t other = fork();
  ASSERT_GE(other, 0);
  if (other == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    int fd = ConnectTo(socket_path);
    _exit(fd < 0 && errno == EACCES ? 0 : 1);
  }
  int status = 0;
  waitpid(other, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "1: another uid connected, 2: setuid failed";

  // A process of an allowed uid outside the traced tree (this test) is
  // disconnected at once, whatever it sends; it never waits on the agent.
  int outsider = ConnectTo(socket_path);
  ASSERT_GE(outsider, 0) << strerror(errno);
  (void)send(outsider, "garbage", 7, MSG_NOSIGNAL | MSG_DONTWAIT);
  char byte;
  EXPECT_TRUE(rt::WaitUntil([&] { return recv(outsider, &byte, 1, MSG_DONTWAIT) == 0; }, 5))
      << "the agent kept a connection from outside the tree";
  close(outsider);

  EXPECT_TRUE(rt::WaitUntil([&] { return access(ready.c_str(), F_OK) == 0; }, 20)) << "the hostile client never ran";
  rt::RunResult r = tracer.Wait(60);
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "refused 1 shim connection(s) from outside the traced tree")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "discarded 3 malformed message(s) on the shim socket")) << r.err;

  // Every step the job made is in the trace.
  const JobLog log = ReadJobLog(job_log);
  ASSERT_GT(log.total, 0u);
  auto contents = rt::ReadTrace(trace);
  ASSERT_TRUE(contents.ok()) << contents.status();
  uint64_t ranges = 0;
  for (const v1::Event& e : contents->events) ranges += e.has_nvtx_range() && e.nvtx_range().name() == "step";
  EXPECT_EQ(ranges, log.total);
}

}  // namespace
}  // namespace gpuos
