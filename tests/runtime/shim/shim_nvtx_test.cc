// Runtime tests of the CUDA shim's CPU-only half, with the real gpuos-trace
// and libgpuos_shim.so: NVTX ranges are recorded exactly (names, nesting,
// domains, threads, durations), the shim stays inert in programs that make
// no NVTX or CUDA call, and a traced program never waits on a missing or
// stuck agent.  Needs root (eBPF).
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime_support.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

const std::string kTracer = GPUOS_TRACE_BIN;
const std::string kWorkloads = GPUOS_WORKLOAD_DIR;

std::string ShimPath() {
  std::string dir = kTracer.substr(0, kTracer.rfind('/'));
  return dir + "/libgpuos_shim.so";
}

std::string TempDir() {
  char templ[] = "/tmp/gpuos-shim-test.XXXXXX";
  return mkdtemp(templ) ? templ : "/tmp";
}

// Runs a shell command, returns its exit status and stdout.
int Shell(const std::string& command, std::string* out = nullptr) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) text.append(buf, n);
  int status = pclose(pipe);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<v1::Event> ReadEvents(const std::string& path) {
  std::vector<v1::Event> events;
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return events;
  absl::Status status = ForEachEvent(**reader, [&](const v1::Event& e) { events.push_back(e); });
  EXPECT_TRUE(status.ok()) << status;
  return events;
}

long ValueAfter(const std::string& text, const std::string& key) {
  size_t pos = text.find(key + "=");
  return pos == std::string::npos ? -1 : atol(text.c_str() + pos + key.size() + 1);
}

class ShimNvtxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to load eBPF programs";
    if (access(ShimPath().c_str(), R_OK) != 0) GTEST_SKIP() << "shim not built (no NVTX headers)";
    dir_ = TempDir();
  }
  void TearDown() override {
    if (!dir_.empty()) Shell("rm -rf " + dir_);
  }
  std::string dir_;
};

TEST_F(ShimNvtxTest, RecordsNestedRangesDomainsAndThreadsExactly) {
  const int steps = 7;
  const int sleep_us = 3000;
  std::string trace = dir_ + "/nvtx.gpuos";
  std::string out;
  ASSERT_EQ(Shell(kTracer + " -q -o " + trace + " -- " + kWorkloads + "/nvtx_program --steps " +
                    std::to_string(steps) + " --sleep-us " + std::to_string(sleep_us),
                &out),
            0);
  long main_tid = ValueAfter(out, "main_tid");
  long helper_tid = ValueAfter(out, "helper_tid");
  ASSERT_GT(main_tid, 0);
  ASSERT_GT(helper_tid, 0);

  std::vector<v1::Event> events = ReadEvents(trace);
  std::map<std::string, std::vector<v1::Event>> ranges;
  std::vector<v1::Event> marks;
  bool stats_seen = false;
  for (const v1::Event& e : events) {
    if (e.has_nvtx_range()) ranges[e.nvtx_range().name()].push_back(e);
    if (e.has_nvtx_mark()) marks.push_back(e);
    if (e.has_shim_stats()) {
      stats_seen = true;
      EXPECT_TRUE(e.shim_stats().nvtx_active());
      EXPECT_EQ(e.shim_stats().dropped_queue_full(), 0u);
      EXPECT_EQ(e.shim_stats().dropped_send_failed(), 0u);
    }
  }
  EXPECT_TRUE(stats_seen);
  ASSERT_EQ(ranges["step"].size(), static_cast<size_t>(steps));
  ASSERT_EQ(ranges["forward"].size(), static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    const v1::Event& step = ranges["step"][i];
    const v1::Event& forward = ranges["forward"][i];
    EXPECT_EQ(step.tid(), static_cast<uint32_t>(main_tid));
    EXPECT_EQ(forward.tid(), static_cast<uint32_t>(main_tid));
    EXPECT_EQ(step.nvtx_range().kind(), v1::NvtxRange::PUSH_POP);
    EXPECT_EQ(step.nvtx_range().depth(), 0u);
    EXPECT_EQ(forward.nvtx_range().depth(), 1u);
    EXPECT_EQ(step.nvtx_range().domain(), "");
    // forward sleeps sleep_us and lies inside its step.
    EXPECT_GE(forward.nvtx_range().duration_ns(), sleep_us * 1000ull);
    EXPECT_GE(forward.ts_ns(), step.ts_ns());
    EXPECT_LE(forward.ts_ns() + forward.nvtx_range().duration_ns(),
              step.ts_ns() + step.nvtx_range().duration_ns());
    // Steps follow one another.
    if (i > 0) {
      const v1::Event& prev = ranges["step"][i - 1];
      EXPECT_GE(step.ts_ns(), prev.ts_ns() + prev.nvtx_range().duration_ns());
    }
  }
  ASSERT_EQ(ranges["async"].size(), 1u);
  const v1::Event& async = ranges["async"][0];
  EXPECT_EQ(async.nvtx_range().kind(), v1::NvtxRange::START_END);
  EXPECT_EQ(async.tid(), static_cast<uint32_t>(main_tid));
  EXPECT_EQ(async.nvtx_range().end_tid(), static_cast<uint32_t>(helper_tid));
  EXPECT_GE(async.nvtx_range().duration_ns(), sleep_us * 1000ull);

  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].nvtx_mark().name(), "mark-from-helper");
  EXPECT_EQ(marks[0].tid(), static_cast<uint32_t>(helper_tid));
  // Made after the main thread's thread-locals were destroyed: the mark is
  // kept, the push/pop (no stack left to nest in) is not.
  EXPECT_EQ(marks[1].nvtx_mark().name(), "at-exit");
  EXPECT_EQ(ranges.count("exit-range"), 0u);

  ASSERT_EQ(ranges["dom-range"].size(), 1u);
  EXPECT_EQ(ranges["dom-range"][0].nvtx_range().domain(), "gpuos-test");
  EXPECT_EQ(ranges["dom-range"][0].nvtx_range().color(), 0xFF00FF00u);
  EXPECT_GE(ranges["dom-range"][0].nvtx_range().duration_ns(), sleep_us * 1000ull);
  // Two handles of one domain name are one domain.
  ASSERT_EQ(ranges["same-name"].size(), 1u);
  EXPECT_EQ(ranges["same-name"][0].nvtx_range().domain(), "gpuos-test");
  EXPECT_EQ(ranges["same-name"][0].nvtx_range().depth(), 0u);

  // NVTX times are CLOCK_MONOTONIC, like the eBPF events: every range lies
  // inside its process's life as the kernel side recorded it.
  uint64_t start = 0, exit = 0;
  for (const v1::Event& e : events) {
    if (e.has_process_start() && e.process_start().is_root()) start = e.ts_ns();
    if (e.has_process_exit() && e.pid() == events[0].pid()) exit = e.ts_ns();
  }
  ASSERT_GT(start, 0u);
  ASSERT_GT(exit, start);
  for (const auto& [name, list] : ranges) {
    for (const v1::Event& e : list) {
      EXPECT_GT(e.ts_ns(), start) << name;
      EXPECT_LT(e.ts_ns() + e.nvtx_range().duration_ns(), exit) << name;
    }
  }
}

TEST_F(ShimNvtxTest, ShimIsInertInProgramsWithoutNvtxOrCuda) {
  std::string trace = dir_ + "/inert.gpuos";
  // The shim is preloaded, so it is in the maps; but no thread, no
  // connection and no event come from it.
  std::string out;
  ASSERT_EQ(Shell(kTracer + " -q -o " + trace +
                    " -- sh -c 'grep -c libgpuos_shim /proc/self/maps; sleep 0.2'",
                &out),
            0);
  EXPECT_GE(atoi(out.c_str()), 1) << "shim not loaded: " << out;
  size_t threads = 0;
  for (const v1::Event& e : ReadEvents(trace)) {
    EXPECT_FALSE(e.has_shim_stats() || e.has_nvtx_range()) << e.DebugString();
    if (e.has_thread_start()) ++threads;
  }
  EXPECT_EQ(threads, 0u) << "the shim started a thread in a program that never used it";
}

// --cuda-records reaches the shim of every traced process (as
// GPUOS_CUPTI_KINDS, read when CUDA starts, which needs a GPU to see; the
// GPU session checks the records themselves), child processes included;
// without it gpuos-trace sets nothing, and the shim records all kinds.
TEST_F(ShimNvtxTest, CudaRecordsReachEveryTracedProcess) {
  const std::string show = " -- sh -c 'printf \"%s|\" \"$GPUOS_CUPTI_KINDS\"; sh -c \"printf %s \\\"\\$GPUOS_CUPTI_KINDS\\\"\"'";
  std::string out;
  ASSERT_EQ(Shell(kTracer + " -q --cuda-records kernel,memcpy -o " + dir_ + "/kinds.gpuos" + show, &out), 0);
  EXPECT_EQ(out, "kernel,memcpy|kernel,memcpy");
  ASSERT_EQ(Shell("env -u GPUOS_CUPTI_KINDS " + kTracer + " -q -o " + dir_ + "/all.gpuos" + show, &out), 0);
  EXPECT_EQ(out, "|");
}

TEST_F(ShimNvtxTest, TracedProgramDoesNotWaitForAMissingOrStuckAgent) {
  std::string env = "LD_PRELOAD=" + ShimPath() + " NVTX_INJECTION64_PATH=" + ShimPath();
  // No agent at all: the socket does not exist.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Shell(env + " GPUOS_SHIM_SOCKET=" + dir_ + "/missing.sock " + kWorkloads +
                "/nvtx_program --steps 50 --sleep-us 100 >/dev/null"),
            0);
  EXPECT_EQ(Shell(env + " GPUOS_SHIM_SOCKET=" + dir_ + "/missing.sock " + kWorkloads +
                "/nvtx_program --steps 50 --sleep-us 100 >/dev/null"),
            0);
  double missing_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(missing_s, 10.0);

  // A stuck agent: accepts connections but never reads.  The program must
  // still finish; its exit flush gives up after the send timeout.
  std::string path = dir_ + "/stuck.sock";
  int listener = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  t0 = std::chrono::steady_clock::now();
  // Many ranges, so the socket buffer fills and sends block.
  EXPECT_EQ(Shell(env + " GPUOS_SHIM_SOCKET=" + path + " " + kWorkloads +
                "/nvtx_program --steps 20000 --sleep-us 0 >/dev/null"),
            0);
  double stuck_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(stuck_s, 15.0);
  close(listener);
}

// The benchmark knob GPUOS_BENCH_MARKS_TOGGLE (cupti_shim/bench_marks_toggle.h):
// its log alternates "on" and "off" a period apart, and a range is recorded
// exactly when it began in an "on" span.
TEST_F(ShimNvtxTest, BenchMarksToggleDropsRangesBegunInItsOffSpans) {
  const std::string trace = dir_ + "/toggled.gpuos";
  const std::string toggle_log = dir_ + "/toggle.log";
  const std::string step_log = dir_ + "/steps.log";
  ASSERT_EQ(Shell("GPUOS_BENCH_MARKS_TOGGLE=100:" + toggle_log + " " + kTracer + " -q -o " + trace + " -- " +
                  kWorkloads + "/nvtx_step_loop --log " + step_log + " --seconds 1.3 2>/dev/null"),
            0);
  std::vector<std::pair<std::string, uint64_t>> flips;
  {
    std::ifstream in(toggle_log);
    std::string kind;
    uint64_t ns = 0;
    while (in >> kind >> ns) flips.emplace_back(kind, ns);
  }
  ASSERT_GE(flips.size(), 8u);
  for (size_t i = 0; i < flips.size(); ++i) {
    EXPECT_EQ(flips[i].first, i % 2 ? "off" : "on") << "flip " << i;
    // Periods count from the first mark; a flip is logged at the first
    // mark of its period (the program marks every 3 ms).
    const uint64_t due = flips[0].second + i * 100'000'000ull;
    EXPECT_GE(flips[i].second, due) << "flip " << i;
    EXPECT_LT(flips[i].second, due + 50'000'000ull) << "flip " << i;
  }
  // The span a time lies in: its index into flips, or -1 before the first.
  auto span_of = [&](uint64_t ns) {
    int span = -1;
    while (span + 1 < static_cast<int>(flips.size()) && flips[span + 1].second <= ns) ++span;
    return span;
  };
  std::map<std::string, uint64_t> recorded;  // name -> start
  for (const v1::Event& e : ReadEvents(trace)) {
    if (e.has_nvtx_range()) recorded[e.nvtx_range().name()] = e.ts_ns();
  }
  for (const auto& [name, start] : recorded) {
    const int span = span_of(start);
    ASSERT_GE(span, 0) << name;
    EXPECT_EQ(flips[span].first, "on") << name << " was recorded in an off span";
  }
  // Every range of the program's own log is recorded exactly when it began
  // in an "on" span; ranges begun within 1 ms of a flip are not judged (the
  // program's clock reading precedes the shim's).
  std::ifstream in(step_log);
  std::string word;
  size_t n = 0;
  uint64_t begin = 0, end = 0;
  int judged_on = 0, judged_off = 0;
  while (in >> word >> n >> begin >> end) {
    const int span = span_of(begin);
    if (span < 0 || span != span_of(begin + 1'000'000)) continue;
    const bool on = flips[span].first == "on";
    EXPECT_EQ(recorded.count("step " + std::to_string(n)), on ? 1u : 0u) << "step " << n;
    (on ? judged_on : judged_off)++;
  }
  EXPECT_GE(judged_on, 60);
  EXPECT_GE(judged_off, 60);
}

TEST_F(ShimNvtxTest, TracedProgramSurvivesItsTracerBeingKilled) {
  std::string trace = dir_ + "/killed.gpuos";
  std::string done = dir_ + "/done";
  pid_t tracer = fork();
  ASSERT_GE(tracer, 0);
  if (tracer == 0) {
    setpgid(0, 0);
    std::string cmd = kWorkloads + "/nvtx_program --steps 400 --sleep-us 2000 >/dev/null && touch " + done;
    execl(kTracer.c_str(), kTracer.c_str(), "-q", "-o", trace.c_str(), "--", "sh", "-c", cmd.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Killed once the command runs (its child has exec'd): before that, on a
  // loaded machine still loading BPF programs, killing the tracer means the
  // command never starts, which is not what this test is about.
  ASSERT_TRUE(rt::WaitUntil(
      [&] {
        for (pid_t child : rt::ChildrenOf(tracer)) {
          std::string comm = rt::CommOf(child);
          if (comm == "sh" || comm == "nvtx_program") return true;
        }
        return false;
      },
      30));
  usleep(100 * 1000);
  kill(tracer, SIGKILL);
  int status = 0;
  waitpid(tracer, &status, 0);
  // 400 steps of 2 ms: about a second of work left after the kill.
  for (int i = 0; i < 100 && access(done.c_str(), F_OK) != 0; ++i) usleep(100 * 1000);
  EXPECT_EQ(access(done.c_str(), F_OK), 0) << "the traced program did not finish after its tracer died";
}

}  // namespace
}  // namespace gpuos
