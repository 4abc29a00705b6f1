// The shim switched on and off while its process runs (cupti_shim/
// attach_control.h), with the real libgpuos_shim.so: a program started the
// way `gpuos-trace --prepare` starts one (LD_PRELOAD, the injection
// variables, GPUOS_SHIM_PREPARED=1), and this test in the agent's part: a
// ShimListener for the events, the control socket for attach/detach.
// Ranges are counted exactly: the program makes them only when told to and
// says how many it made, so each must arrive if and only if it was made
// between "attached" and "detach".  Also: the injector's entry point called
// in this very process (dlopen + dlsym), its stub page unmapped by the rule,
// a fork child's own listener, and a peer of another uid refused (root
// only).  No GPU, no eBPF, no gpuos-trace.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "record/shim_listener.h"

extern char** environ;

namespace gpuos {
namespace {

const std::string kShim = GPUOS_SHIM_PATH;
const std::string kProgram = std::string(GPUOS_WORKLOAD_DIR) + "/prepared_nvtx_program";

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The agent's event side: everything the shim sends, as the recorder
// would see it (pid from SO_PEERCRED).
class Agent {
 public:
  Agent() {
    auto listener = ShimListener::Create(
        getuid(), getgid(), [](pid_t, uid_t) { return true; },
        [this](const v1::Event& event) { events.push_back(event); });
    EXPECT_TRUE(listener.ok()) << listener.status();
    if (listener.ok()) listener_ = std::move(*listener);
  }
  bool ok() const { return listener_ != nullptr; }
  const std::string& socket() const { return listener_->socket_path(); }
  void Pump() { listener_->Pump(); }
  // Reads until every shim connection has closed (each does at detach).
  void PumpUntilClosed() { listener_->Pump(/*until_closed=*/true); }

  size_t Ranges(const std::string& name, uint32_t pid = 0) const {
    return std::count_if(events.begin(), events.end(), [&](const v1::Event& e) {
      return e.has_nvtx_range() && e.nvtx_range().name() == name && (pid == 0 || e.pid() == pid);
    });
  }
  // Pumps until `done` or ~10 s.
  bool PumpUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 1000; ++i) {
      Pump();
      if (done()) return true;
      usleep(10 * 1000);
    }
    return false;
  }

  std::vector<v1::Event> events;

 private:
  std::unique_ptr<ShimListener> listener_;
};

// A program on pipes: commands in, answers out.
class Program {
 public:
  // Starts `path` with this process's environment plus `env`.
  Program(const std::string& path, const std::vector<std::string>& env) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    std::vector<std::string> entries;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      bool replaced = StartsWith(entry, "GPUOS_SHIM_SOCKET=") ||
                      StartsWith(entry, "GPUOS_SHIM_PREPARED=");
      for (const std::string& mine : env) {
        replaced |= entry.substr(0, entry.find('=') + 1) == mine.substr(0, mine.find('=') + 1);
      }
      if (!replaced) entries.push_back(entry);
    }
    entries.insert(entries.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (std::string& entry : entries) envp.push_back(entry.data());
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
      execve(path.c_str(), argv, envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Program() {
    if (to_ >= 0) close(to_);  // EOF on stdin: the program ends
    if (from_ >= 0) close(from_);
    if (pid_ > 0) {
      int status = 0;
      for (int i = 0; i < 500 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10 * 1000);
      if (waitpid(pid_, &status, WNOHANG) == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
    }
  }
  pid_t pid() const { return pid_; }

  bool Send(const std::string& line) {
    std::string text = line + "\n";
    return write(to_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }
  // The next line of output; "" after ~10 s or at EOF.
  std::string ReadLine() {
    for (int waited = 0; waited < 10000;) {
      size_t newline = buffered_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffered_.substr(0, newline);
        buffered_.erase(0, newline + 1);
        return line;
      }
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) {
        waited += 100;
        continue;
      }
      char chunk[512];
      ssize_t n = read(from_, chunk, sizeof(chunk));
      if (n <= 0) return "";
      buffered_.append(chunk, static_cast<size_t>(n));
    }
    return "";
  }
  // Sends a command and returns its answer.
  std::string Do(const std::string& command) {
    if (!Send(command)) return "";
    return ReadLine();
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  std::string buffered_;
};

std::vector<std::string> PreparedEnvironment() {
  return {"LD_PRELOAD=" + kShim, "NVTX_INJECTION64_PATH=" + kShim,
          "CUDA_INJECTION64_PATH=" + kShim, "GPUOS_SHIM_PREPARED=1"};
}

// A connection to the shim of `pid`, retried for up to `timeout_ms` (a
// listener may still be coming up); -1 if none.
int ConnectControl(pid_t pid, int timeout_ms = 5000) {
  const std::string name = "gpuos-shim." + std::to_string(pid);
  for (int waited = 0;; waited += 10) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path + 1, name.data(), name.size());
    socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), length) == 0) return fd;
    close(fd);
    if (waited >= timeout_ms) return -1;
    usleep(10 * 1000);
  }
}

// Sends `request` and returns the reply ("" on timeout or EOF), reading
// the agent's events meanwhile, as the real agent does: the shim's last
// flush must not wait on a full socket.
std::string Request(int control, const std::string& request, Agent* agent = nullptr) {
  if (send(control, request.data(), request.size(), MSG_NOSIGNAL) < 0) return "";
  for (int waited = 0; waited < 20000; waited += 10) {
    if (agent != nullptr) agent->Pump();
    pollfd p{control, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    char reply[4096];
    ssize_t n = recv(control, reply, sizeof(reply), 0);
    if (n <= 0) return "";
    return std::string(reply, static_cast<size_t>(n));
  }
  return "";
}

uint64_t DetachedCount(const std::string& reply) {
  if (!StartsWith(reply, "detached ")) return ~0ull;
  return std::strtoull(reply.c_str() + 9, nullptr, 10);
}

class ShimAttachControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kShim.c_str(), R_OK) != 0) GTEST_SKIP() << "shim not built (no NVTX headers)";
    ASSERT_EQ(access(kProgram.c_str(), X_OK), 0) << kProgram;
  }
  // A prepared program, its "pid=" line read.
  std::unique_ptr<Program> StartPrepared(const std::vector<std::string>& more_env = {}) {
    std::vector<std::string> env = PreparedEnvironment();
    env.insert(env.end(), more_env.begin(), more_env.end());
    auto program = std::make_unique<Program>(kProgram, env);
    EXPECT_EQ(program->ReadLine(), "pid=" + std::to_string(program->pid()));
    return program;
  }
};

TEST_F(ShimAttachControlTest, RecordsExactlyWhatWasMadeWhileAttachedAgainAndAgain) {
  Agent agent;
  ASSERT_TRUE(agent.ok());
  auto program = StartPrepared();
  const uint32_t pid = static_cast<uint32_t>(program->pid());
  int control = ConnectControl(program->pid());
  ASSERT_GE(control, 0) << "no control listener in a prepared process";

  // Detached: made, not recorded (NVTX is set up by this first call).
  ASSERT_EQ(program->Do("burst before 50"), "made before 50");
  std::string reply = Request(control, "attach " + agent.socket(), &agent);
  ASSERT_TRUE(StartsWith(reply, "attached cupti=0 nvtx=1 prepared process; ")) << reply;
  ASSERT_EQ(program->Do("burst during 100"), "made during 100");
  reply = Request(control, "detach", &agent);
  const uint64_t first_sent = DetachedCount(reply);
  ASSERT_NE(first_sent, ~0ull) << reply;
  agent.PumpUntilClosed();

  EXPECT_EQ(agent.Ranges("before"), 0u);
  EXPECT_EQ(agent.Ranges("during", pid), 100u);
  // "detached N" counts what the agent got: the ranges and the ShimStats.
  EXPECT_EQ(first_sent, agent.events.size());
  bool stats_seen = false;
  for (const v1::Event& e : agent.events) {
    EXPECT_EQ(e.pid(), pid);
    if (!e.has_shim_stats()) continue;
    stats_seen = true;
    EXPECT_TRUE(StartsWith(e.shim_stats().cupti_status(), "attached (prepared process): "))
        << e.shim_stats().cupti_status();
    EXPECT_TRUE(e.shim_stats().nvtx_active());
    EXPECT_FALSE(e.shim_stats().cupti_active());
    EXPECT_EQ(e.shim_stats().dropped_queue_full(), 0u);
    EXPECT_EQ(e.shim_stats().dropped_send_failed(), 0u);
  }
  EXPECT_TRUE(stats_seen);

  // Detached again: nothing more arrives.
  ASSERT_EQ(program->Do("burst after 30"), "made after 30");
  usleep(300 * 1000);
  agent.Pump();
  EXPECT_EQ(agent.events.size(), first_sent);

  // And once more, on the same connection.
  reply = Request(control, "attach " + agent.socket(), &agent);
  ASSERT_TRUE(StartsWith(reply, "attached cupti=0 nvtx=1 ")) << reply;
  ASSERT_EQ(program->Do("burst again 40"), "made again 40");
  reply = Request(control, "detach", &agent);
  const uint64_t second_sent = DetachedCount(reply);
  ASSERT_NE(second_sent, ~0ull) << reply;
  agent.PumpUntilClosed();
  EXPECT_EQ(agent.Ranges("again", pid), 40u);
  EXPECT_EQ(agent.Ranges("after"), 0u);
  EXPECT_EQ(agent.Ranges("during"), 100u);
  // Counters start again at each attach.
  EXPECT_EQ(second_sent, agent.events.size() - first_sent);
  // A detach while detached changes nothing.
  EXPECT_EQ(Request(control, "detach", &agent), "detached 0");
  close(control);
}

TEST_F(ShimAttachControlTest, AnAgentThatGoesAwayDetachesTheShim) {
  Agent agent;
  ASSERT_TRUE(agent.ok());
  auto program = StartPrepared();
  int control = ConnectControl(program->pid());
  ASSERT_GE(control, 0);
  ASSERT_TRUE(StartsWith(Request(control, "attach " + agent.socket(), &agent), "attached "));
  ASSERT_EQ(program->Do("burst kept 10"), "made kept 10");
  close(control);  // no "detach": the agent died, say
  // What was made while attached is still flushed to the agent.
  EXPECT_TRUE(agent.PumpUntil([&] { return agent.Ranges("kept") == 10; }));

  // A new agent finds the shim detached (and its request proves the old
  // connection's end was handled first).
  control = ConnectControl(program->pid());
  ASSERT_GE(control, 0);
  EXPECT_EQ(Request(control, "detach", &agent), "detached 0");
  ASSERT_EQ(program->Do("burst lost 5"), "made lost 5");
  usleep(300 * 1000);
  agent.Pump();
  EXPECT_EQ(agent.Ranges("lost"), 0u);
  ASSERT_TRUE(StartsWith(Request(control, "attach " + agent.socket(), &agent), "attached "));
  ASSERT_EQ(program->Do("burst back 3"), "made back 3");
  ASSERT_NE(DetachedCount(Request(control, "detach", &agent)), ~0ull);
  agent.PumpUntilClosed();
  EXPECT_EQ(agent.Ranges("back"), 3u);
  close(control);
}

// Ranges made by a thread that never stops: every one recorded lies inside
// the window from sending "attach" to reading "detached"; one straddling
// either end is left out whole, never cut.
TEST_F(ShimAttachControlTest, RangesOfARunningThreadFallInsideTheAttachWindow) {
  Agent agent;
  ASSERT_TRUE(agent.ok());
  auto program = StartPrepared();
  int control = ConnectControl(program->pid());
  ASSERT_GE(control, 0);
  ASSERT_EQ(program->Do("spin spin"), "spinning spin");
  usleep(100 * 1000);
  const uint64_t window_start = NowNs();
  ASSERT_TRUE(StartsWith(Request(control, "attach " + agent.socket(), &agent), "attached "));
  for (int i = 0; i < 30; ++i) {
    agent.Pump();
    usleep(10 * 1000);
  }
  std::string reply = Request(control, "detach", &agent);
  const uint64_t window_end = NowNs();
  ASSERT_NE(DetachedCount(reply), ~0ull) << reply;
  const std::string made = program->Do("stop");
  ASSERT_TRUE(StartsWith(made, "made spin ")) << made;
  const size_t made_count = std::strtoull(made.c_str() + 10, nullptr, 10);
  agent.PumpUntilClosed();

  const size_t recorded = agent.Ranges("spin");
  EXPECT_GT(recorded, 0u);
  EXPECT_LT(recorded, made_count);  // it spun before and after the window
  std::vector<uint64_t> starts;
  for (const v1::Event& e : agent.events) {
    if (!e.has_nvtx_range()) continue;
    EXPECT_GE(e.ts_ns(), window_start);
    EXPECT_LE(e.ts_ns() + e.nvtx_range().duration_ns(), window_end);
    starts.push_back(e.ts_ns());
  }
  // No stretch of the window went missing (the thread makes one every
  // ~50 us; a second allows for a badly loaded machine).
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) EXPECT_LT(starts[i] - starts[i - 1], 1'000'000'000u);
  close(control);
}

TEST_F(ShimAttachControlTest, AForkChildHasItsOwnListenerAndStartsDetached) {
  Agent agent;
  ASSERT_TRUE(agent.ok());
  auto program = StartPrepared();
  int parent_control = ConnectControl(program->pid());
  ASSERT_GE(parent_control, 0);
  ASSERT_TRUE(StartsWith(Request(parent_control, "attach " + agent.socket(), &agent), "attached "));
  ASSERT_EQ(program->Do("burst parent 4"), "made parent 4");
  const std::string forked = program->Do("fork");
  ASSERT_TRUE(StartsWith(forked, "child=")) << forked;
  const pid_t child = static_cast<pid_t>(std::atoi(forked.c_str() + 6));
  ASSERT_GT(child, 0);

  // The child's first NVTX call ("child-hello") brought its listener up;
  // its parent was attached, but the child starts detached.
  int child_control = ConnectControl(child);
  ASSERT_GE(child_control, 0) << "the fork child has no listener of its own";
  ASSERT_EQ(program->Do("child burst unseen 6"), "child made unseen 6");
  ASSERT_TRUE(StartsWith(Request(child_control, "attach " + agent.socket(), &agent),
                         "attached cupti=0 nvtx=1 prepared process; "));
  ASSERT_EQ(program->Do("child burst child 25"), "child made child 25");
  ASSERT_NE(DetachedCount(Request(child_control, "detach", &agent)), ~0ull);
  ASSERT_NE(DetachedCount(Request(parent_control, "detach", &agent)), ~0ull);
  agent.PumpUntilClosed();

  EXPECT_EQ(agent.Ranges("child", static_cast<uint32_t>(child)), 25u);
  EXPECT_EQ(agent.Ranges("child"), 25u);
  EXPECT_EQ(agent.Ranges("unseen"), 0u);
  EXPECT_EQ(agent.Ranges("child-hello"), 0u);
  EXPECT_EQ(agent.Ranges("parent", static_cast<uint32_t>(program->pid())), 4u);
  EXPECT_EQ(program->Do("child exit"), "child exited");
  close(child_control);
  close(parent_control);
}

TEST_F(ShimAttachControlTest, BadRequestsAndASecondAgentChangeNothing) {
  Agent agent;
  ASSERT_TRUE(agent.ok());
  auto program = StartPrepared();
  int control = ConnectControl(program->pid());
  ASSERT_GE(control, 0);
  EXPECT_TRUE(StartsWith(Request(control, "attach"), "error attach needs"));
  EXPECT_TRUE(StartsWith(Request(control, "launch the missiles"), "error unknown request"));
  std::string reply = Request(control, "attach /nonexistent/gpuos.sock");
  EXPECT_TRUE(StartsWith(reply, "error cannot connect to the agent's socket /nonexistent/gpuos.sock"))
      << reply;
  // One agent at a time: a second is told so and disconnected.
  int second = ConnectControl(program->pid());
  ASSERT_GE(second, 0);
  char unprompted[256];
  ssize_t n = recv(second, unprompted, sizeof(unprompted), 0);
  EXPECT_TRUE(n > 0 && StartsWith(std::string(unprompted, static_cast<size_t>(n)),
                                  "error another gpuos-trace"));
  reply = Request(second, "attach " + agent.socket());
  EXPECT_TRUE(StartsWith(reply, "error another gpuos-trace")) << reply;
  close(second);
  ASSERT_EQ(program->Do("burst ignored 5"), "made ignored 5");
  usleep(200 * 1000);
  agent.Pump();
  EXPECT_EQ(agent.Ranges("ignored"), 0u);
  // Still detached, still serving the first.
  EXPECT_EQ(Request(control, "detach"), "detached 0");
  ASSERT_TRUE(StartsWith(Request(control, "attach " + agent.socket(), &agent), "attached "));
  EXPECT_TRUE(StartsWith(Request(control, "attach " + agent.socket(), &agent),
                         "error already attached"));
  ASSERT_NE(DetachedCount(Request(control, "detach", &agent)), ~0ull);
  close(control);
}

// Hostile clients of an allowed uid: one that connects and never sends nor
// reads, one that sends garbage and never reads the replies.  Neither
// holds up the job, and each is dropped (once idle, after 16 requests not
// understood), so that a gpuos-trace can still attach: without that it
// would be told "another gpuos-trace is already connected" for as long as
// the client stays.
TEST_F(ShimAttachControlTest, SilentAndGarbageClientsLockNobodyOut) {
  Agent agent;
  ASSERT_TRUE(agent.ok());
  auto program = StartPrepared({"GPUOS_SHIM_CONTROL_IDLE_MS=500"});
  int silent = ConnectControl(program->pid());
  ASSERT_GE(silent, 0);
  // The job runs on meanwhile.
  ASSERT_EQ(program->Do("burst idle 3"), "made idle 3");
  char reply[256];
  pollfd p{silent, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1) << "the silent client was never dropped";
  ssize_t n = recv(silent, reply, sizeof(reply), 0);
  EXPECT_TRUE(n > 0 && StartsWith(std::string(reply, static_cast<size_t>(n)), "error idle without attaching"));
  EXPECT_EQ(recv(silent, reply, sizeof(reply), 0), 0) << "not disconnected";
  close(silent);

  // Garbage, far more than its socket buffer holds replies for, never read.
  int noisy = ConnectControl(program->pid());
  ASSERT_GE(noisy, 0);
  std::string junk(3000, '\xff');
  for (int i = 0; i < 2000; ++i) {
    if (send(noisy, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) break;
  }
  ASSERT_EQ(program->Do("burst noisy 3"), "made noisy 3");
  // Each message got an error reply (while there was room for it), and
  // the client was dropped.
  bool closed = false, only_errors = true;
  for (int waited = 0; waited < 10000 && !closed; waited += 10) {
    pollfd q{noisy, POLLIN, 0};
    if (poll(&q, 1, 10) <= 0) continue;
    n = recv(noisy, reply, sizeof(reply), 0);
    closed = n <= 0;
    if (n > 0) only_errors &= StartsWith(std::string(reply, static_cast<size_t>(n)), "error ");
  }
  EXPECT_TRUE(closed) << "the garbage client was never dropped";
  EXPECT_TRUE(only_errors);
  close(noisy);

  int control = ConnectControl(program->pid());
  ASSERT_GE(control, 0);
  ASSERT_TRUE(StartsWith(Request(control, "attach " + agent.socket(), &agent), "attached ")) << "locked out";
  ASSERT_EQ(program->Do("burst seen 4"), "made seen 4");
  ASSERT_NE(DetachedCount(Request(control, "detach", &agent)), ~0ull);
  agent.PumpUntilClosed();
  EXPECT_EQ(agent.Ranges("seen"), 4u);
  EXPECT_EQ(agent.Ranges("idle") + agent.Ranges("noisy"), 0u);
  close(control);
}

TEST_F(ShimAttachControlTest, OnlyPreparedProcessesListen) {
  // Preloaded and named for NVTX, but neither prepared nor attached to: no
  // listener, and NVTX is switched off for the process as before.
  Program plain(kProgram, {"LD_PRELOAD=" + kShim, "NVTX_INJECTION64_PATH=" + kShim});
  ASSERT_EQ(plain.ReadLine(), "pid=" + std::to_string(plain.pid()));
  ASSERT_EQ(plain.Do("burst x 3"), "made x 3");
  EXPECT_LT(ConnectControl(plain.pid(), 200), 0);
  // A launched trace records from the start; GPUOS_SHIM_PREPARED does not
  // add a listener to it.
  Program launched(kProgram, {"LD_PRELOAD=" + kShim, "NVTX_INJECTION64_PATH=" + kShim,
                              "GPUOS_SHIM_PREPARED=1", "GPUOS_SHIM_SOCKET=/nonexistent/s.sock"});
  ASSERT_EQ(launched.ReadLine(), "pid=" + std::to_string(launched.pid()));
  ASSERT_EQ(launched.Do("burst x 3"), "made x 3");
  EXPECT_LT(ConnectControl(launched.pid(), 200), 0);
}

TEST_F(ShimAttachControlTest, APeerOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  Agent agent;
  ASSERT_TRUE(agent.ok());
  auto program = StartPrepared();
  const pid_t target = program->pid();
  const std::string agent_socket = agent.socket();
  pid_t peer = fork();
  ASSERT_GE(peer, 0);
  if (peer == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    int fd = ConnectControl(target, 1000);
    if (fd < 0) _exit(3);
    std::string request = "attach " + agent_socket;
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) _exit(0);  // closed already
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) _exit(4);  // neither closed nor answered
    char reply[256];
    ssize_t n = recv(fd, reply, sizeof(reply), 0);
    _exit(n <= 0 ? 0 : 1);  // closed without an answer: refused
  }
  int status = 0;
  waitpid(peer, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: answered, 2: setuid failed, 3: no listener, 4: hung";
  ASSERT_EQ(program->Do("burst refused 5"), "made refused 5");
  usleep(200 * 1000);
  agent.Pump();
  EXPECT_EQ(agent.Ranges("refused"), 0u);
  // Root is served.
  int control = ConnectControl(target);
  ASSERT_GE(control, 0);
  EXPECT_EQ(Request(control, "detach"), "detached 0");
  close(control);
}

// The injector's side, played in this process: it loads the shim and calls
// gpuos_shim_attach_entry with its code page and thread.
using AttachEntry = void (*)(const char*, uintptr_t, size_t, int);

bool Mapped(void* page, size_t size) {
  unsigned char resident;
  return mincore(page, size, &resident) == 0;
}

// A thread blocked in a read of its own pipe until released (or the end
// of the scope, so that a failed assertion never leaves it joinable).
class BlockedThread {
 public:
  // `first`, if set, runs before the read (the stub's code, say).
  explicit BlockedThread(std::function<void()> first = {}) {
    if (pipe(pipe_) != 0) pipe_[0] = pipe_[1] = -1;
    thread_ = std::thread([this, first] {
      tid_ = static_cast<int>(syscall(SYS_gettid));
      if (first) first();
      char c;
      if (read(pipe_[0], &c, 1) < 0) return;
    });
    while (tid_.load() == 0) usleep(1000);
  }
  ~BlockedThread() {
    Release();
    close(pipe_[0]);
    close(pipe_[1]);
  }
  int tid() const { return tid_.load(); }
  void Release() {
    if (!thread_.joinable()) return;
    if (write(pipe_[1], "x", 1) != 1) return;
    thread_.join();
  }

 private:
  int pipe_[2];
  std::atomic<int> tid_{0};
  std::thread thread_;
};

bool BecomesUnmapped(void* page, size_t size, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 5) {
    if (!Mapped(page, size)) return true;
    usleep(5 * 1000);
  }
  return !Mapped(page, size);
}

TEST_F(ShimAttachControlTest, TheInjectorsEntryStartsTheListenerAndUnmapsItsPageByTheRule) {
  // Before the entry: no listener here (the entry starts one per process,
  // so this test runs once per process: ctest runs each test alone).
  if (int probe = ConnectControl(getpid(), 0); probe >= 0) {
    close(probe);
    GTEST_SKIP() << "the shim's listener already runs in this process (--gtest_repeat?)";
  }
  void* shim = dlopen(kShim.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(shim, nullptr) << dlerror();
  auto entry = reinterpret_cast<AttachEntry>(dlsym(shim, "gpuos_shim_attach_entry"));
  auto push = reinterpret_cast<int (*)(const char*)>(dlsym(shim, "gpuos_shim_python_push"));
  auto pop = reinterpret_cast<int (*)()>(dlsym(shim, "gpuos_shim_python_pop"));
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(push, nullptr);
  ASSERT_NE(pop, nullptr);
  const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));

  // A page whose thread has already moved on, blocked in a read elsewhere.
  void* left = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(left, MAP_FAILED);
  BlockedThread holder;
  usleep(20 * 1000);  // into its read
  auto started = std::chrono::steady_clock::now();
  entry("", reinterpret_cast<uintptr_t>(left), size, holder.tid());
  const double entry_ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(entry_ms, 200.0) << "the entry must return at once";
  // The socket is bound before the entry returns.
  int control = ConnectControl(getpid(), 0);
  EXPECT_GE(control, 0);
  EXPECT_TRUE(BecomesUnmapped(left, size, 5000));

  // A page whose thread has exited.
  void* gone = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  int gone_tid = 0;
  {
    BlockedThread short_lived;
    gone_tid = short_lived.tid();
  }
  entry("", reinterpret_cast<uintptr_t>(gone), size, gone_tid);
  EXPECT_TRUE(BecomesUnmapped(gone, size, 5000));

#if defined(__x86_64__)
  // A page the thread is still executing in (blocked in a read there, as a
  // stub waiting for its injector would be): kept until it leaves.
  void* busy = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(busy, MAP_FAILED);
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  unsigned char code[] = {0xBF, 0, 0, 0, 0,              // mov edi, gate
                          0x31, 0xC0,                    // xor eax, eax (read)
                          0x48, 0x8D, 0x74, 0x24, 0xF0,  // lea rsi, [rsp-16]
                          0xBA, 0x01, 0x00, 0x00, 0x00,  // mov edx, 1
                          0x0F, 0x05,                    // syscall
                          0xC3};                         // ret
  const int32_t gate_fd = gate[0];
  memcpy(code + 1, &gate_fd, sizeof(gate_fd));
  memcpy(busy, code, sizeof(code));
  ASSERT_EQ(mprotect(busy, size, PROT_READ | PROT_EXEC), 0);
  {
    // Runs the page's code, then blocks in its own read, outside the page.
    BlockedThread stub([busy] { reinterpret_cast<void (*)()>(busy)(); });
    usleep(50 * 1000);  // into the read in the page
    entry("", reinterpret_cast<uintptr_t>(busy), size, stub.tid());
    usleep(500 * 1000);
    EXPECT_TRUE(Mapped(busy, size)) << "unmapped under a thread still in it";
    EXPECT_EQ(write(gate[1], "x", 1), 1);  // the stub returns and blocks elsewhere
    EXPECT_TRUE(BecomesUnmapped(busy, size, 5000));
  }
  close(gate[0]);
  close(gate[1]);
#endif

  // The listener works like a prepared process's: ranges from the Python
  // hook's entry points are recorded while attached only.
  ASSERT_GE(control, 0);
  Agent agent;
  ASSERT_TRUE(agent.ok());
  push("py-before");
  pop();
  std::string reply = Request(control, "attach " + agent.socket(), &agent);
  EXPECT_TRUE(StartsWith(reply, "attached cupti=0 ")) << reply;
  EXPECT_NE(reply.find("injected shim"), std::string::npos) << reply;
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(push("py-range"), 0);
    EXPECT_EQ(pop(), 0);
  }
  ASSERT_NE(DetachedCount(Request(control, "detach", &agent)), ~0ull);
  agent.PumpUntilClosed();
  EXPECT_EQ(agent.Ranges("py-range"), 12u);
  EXPECT_EQ(agent.Ranges("py-before"), 0u);
  for (const v1::Event& e : agent.events) {
    if (e.has_nvtx_range()) {
      EXPECT_EQ(e.nvtx_range().domain(), "gpuos.python");
    }
  }
  close(control);
}

}  // namespace
}  // namespace gpuos
