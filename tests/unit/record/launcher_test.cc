// Tests of the launcher with real processes: launcher_probe (built from
// tests/workloads/) is the traced command, and real signals, ptys, sudo-style
// privilege drops and SIGKILLed tracers are used.  The privilege tests need
// root and skip without it.
#include "record/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The probe lives next to this test's binary: <build>/tests/workloads/.
std::string ProbePath() {
  if (const char* dir = getenv("GPUOS_WORKLOAD_DIR")) return std::string(dir) + "/launcher_probe";
  return (fs::read_symlink("/proc/self/exe").parent_path() / "workloads" / "launcher_probe")
      .string();
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "key=value" lines, as the probe's ids/env modes write them.
std::map<std::string, std::string> ParseLines(const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    out[kv.first] = kv.second;
  }
  return out;
}

long long MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Polls ReapChildren until no child is left; false on timeout.
bool RunToEnd(LaunchedCommand& command, milliseconds timeout = milliseconds(5000)) {
  const auto deadline = steady_clock::now() + timeout;
  while (!command.ReapChildren()) {
    if (steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// Waits for one specific child (a re-parented orphan); nullopt on timeout.
std::optional<int> WaitForPid(pid_t pid, milliseconds timeout = milliseconds(5000)) {
  const auto deadline = steady_clock::now() + timeout;
  while (steady_clock::now() < deadline) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG | __WALL);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return std::nullopt;
}

// Kills and reaps every child of this process (orphans re-parented to it
// included); returns how many were still running.
int KillLeftoverChildren() {
  int killed = 0;
  for (int round = 0; round < 100; ++round) {
    std::vector<pid_t> children;
    for (const auto& task : fs::directory_iterator("/proc/self/task")) {
      std::ifstream in(task.path() / "children");
      pid_t pid;
      while (in >> pid) children.push_back(pid);
    }
    for (pid_t pid : children) {
      if (kill(pid, SIGKILL) == 0) ++killed;
    }
    pid_t reaped;
    while ((reaped = waitpid(-1, nullptr, __WALL | WNOHANG)) > 0) {
    }
    if (reaped < 0 && errno == ECHILD) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return killed;
}

// Sets (or, with nullptr, unsets) a variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Blocks the signals OpenSignalFd blocks for one test and puts the mask back,
// consuming anything still pending so unblocking cannot kill the test.
class SignalFdScope {
 public:
  SignalFdScope() {
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_BLOCK, &none, &saved_);
    absl::StatusOr<int> fd = OpenSignalFd();
    EXPECT_TRUE(fd.ok()) << fd.status();
    fd_ = fd.ok() ? *fd : -1;
  }
  ~SignalFdScope() {
    if (fd_ >= 0) close(fd_);
    sigset_t mask;
    sigemptyset(&mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&mask, sig);
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&mask, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  // The next signal other than SIGCHLD, waiting up to 2 s.
  std::optional<signalfd_siginfo> Next() {
    const auto deadline = steady_clock::now() + milliseconds(2000);
    while (steady_clock::now() < deadline) {
      struct pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      signalfd_siginfo info;
      if (read(fd_, &info, sizeof(info)) != sizeof(info)) continue;
      if (info.ssi_signo != SIGCHLD) return info;
    }
    return std::nullopt;
  }
  int fd() const { return fd_; }

 private:
  sigset_t saved_;
  int fd_ = -1;
};

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    probe_ = ProbePath();
    ASSERT_EQ(access(probe_.c_str(), X_OK), 0)
        << probe_ << " is missing: build the launcher_probe target";
    char tmpl[] = "/tmp/launcher_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Writable by the unprivileged users the privilege tests run as.
    ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  }
  void TearDown() override {
    // A failing test may leave processes behind (a hung child, a sleeper that
    // was not stopped); they must not make the following tests fail too.
    const int left = KillLeftoverChildren();
    EXPECT_EQ(left, 0) << "the test left processes running";
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<LaunchedCommand> Prepare(std::vector<std::string> argv, RunAs run_as = {},
                                           std::vector<std::string> extra_env = {}) {
    LaunchOptions options;
    options.argv = std::move(argv);
    options.run_as = run_as;
    options.extra_env = std::move(extra_env);
    absl::StatusOr<std::unique_ptr<LaunchedCommand>> command = LaunchedCommand::Prepare(options);
    EXPECT_TRUE(command.ok()) << command.status();
    return command.ok() ? *std::move(command) : nullptr;
  }

  // Prepare + Release + run to the end; nullptr (with a failure) otherwise.
  std::unique_ptr<LaunchedCommand> Run(std::vector<std::string> argv, RunAs run_as = {},
                                       std::vector<std::string> extra_env = {}) {
    std::unique_ptr<LaunchedCommand> command = Prepare(std::move(argv), run_as, extra_env);
    if (command == nullptr) return nullptr;
    const absl::Status released = command->Release();
    EXPECT_TRUE(released.ok()) << released;
    EXPECT_TRUE(RunToEnd(*command)) << "the command did not end";
    return command;
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string probe_;
  std::string dir_;
};

TEST_F(LauncherTest, ExitCodePassesThrough) {
  for (int code : {0, 3, 255}) {
    std::unique_ptr<LaunchedCommand> command = Run({probe_, "exit", std::to_string(code)});
    ASSERT_NE(command, nullptr);
    ASSERT_TRUE(command->wait_status().has_value());
    EXPECT_TRUE(WIFEXITED(*command->wait_status()));
    EXPECT_EQ(command->exit_code(), code);
  }
}

TEST_F(LauncherTest, DeathBySignalIs128PlusSignal) {
  for (int sig : {SIGKILL, SIGUSR1, SIGTERM}) {
    std::unique_ptr<LaunchedCommand> command = Run({probe_, "raise", std::to_string(sig)});
    ASSERT_NE(command, nullptr);
    ASSERT_TRUE(command->wait_status().has_value());
    EXPECT_TRUE(WIFSIGNALED(*command->wait_status()));
    EXPECT_EQ(command->exit_code(), 128 + sig);
  }
}

// The tracer blocks signals for its signalfd and may ignore some; the
// command must start with the defaults, as from a shell.
TEST_F(LauncherTest, CommandStartsWithDefaultSignalState) {
  SignalFdScope signals;  // SIGTERM blocked here
  struct sigaction ignore = {}, saved = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGUSR2, &ignore, &saved), 0);
  for (int sig : {SIGTERM, SIGUSR2}) {
    std::unique_ptr<LaunchedCommand> command = Run({probe_, "raise", std::to_string(sig)});
    ASSERT_NE(command, nullptr);
    EXPECT_EQ(command->exit_code(), 128 + sig) << "signal " << sig << " did not kill it";
  }
  sigaction(SIGUSR2, &saved, nullptr);
}

TEST_F(LauncherTest, MissingCommandFailsReleaseWith127) {
  const std::string name = "gpuos-no-such-command-7f3a";
  std::unique_ptr<LaunchedCommand> command = Prepare({name, "arg"});
  ASSERT_NE(command, nullptr);
  const absl::Status status = command->Release();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "cannot run 'gpuos-no-such-command-7f3a': No such file or directory");
  EXPECT_EQ(command->exit_code(), 127);
  ASSERT_TRUE(RunToEnd(*command));
  ASSERT_TRUE(command->wait_status().has_value());
  EXPECT_EQ(WEXITSTATUS(*command->wait_status()), 127);
  EXPECT_EQ(command->exit_code(), 127);
}

TEST_F(LauncherTest, DirectoryOrNonExecutableFileFailsWithClearMessage) {
  const std::string not_executable = Path("script.sh");
  {
    std::ofstream out(not_executable);
    out << "#!/bin/sh\nexit 0\n";
  }
  ASSERT_EQ(chmod(not_executable.c_str(), 0644), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir_, "Is a directory"},
      {not_executable, "Permission denied (the file is not executable)"},
  };
  for (const auto& [path, reason] : cases) {
    std::unique_ptr<LaunchedCommand> command = Prepare({path});
    ASSERT_NE(command, nullptr);
    const absl::Status status = command->Release();
    ASSERT_FALSE(status.ok()) << path;
    EXPECT_EQ(status.message(), absl::StrCat("cannot run '", path, "': ", reason));
    ASSERT_TRUE(RunToEnd(*command));
    EXPECT_EQ(command->exit_code(), 127);
  }
}

TEST_F(LauncherTest, ArgvIsPassedExactly) {
  const std::vector<std::string> args = {
      "two words", "'single'", "\"double\"", "", "$HOME", "*", "back\\slash", "new\nline",
      "tab\there", "-", "--flag=a b", "ünïcødé"};
  std::vector<std::string> argv = {probe_, "args", Path("args")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::unique_ptr<LaunchedCommand> command = Run(argv);
  ASSERT_NE(command, nullptr);
  EXPECT_EQ(command->exit_code(), 0);
  std::optional<std::string> written = ReadFile(Path("args"));
  ASSERT_TRUE(written.has_value());
  std::string expected;
  for (const std::string& arg : args) expected.append(arg.c_str(), arg.size() + 1);
  EXPECT_EQ(*written, expected);
}

TEST_F(LauncherTest, ExtraEnvironmentOverridesAndAdds) {
  ScopedEnv keep("GPUOS_LT_KEEP", "kept");
  ScopedEnv old("GPUOS_LT_OLD", "old");
  ScopedEnv absent("GPUOS_LT_NEW", nullptr);
  std::unique_ptr<LaunchedCommand> command =
      Run({probe_, "env", Path("env"), "GPUOS_LT_KEEP", "GPUOS_LT_OLD", "GPUOS_LT_NEW"}, {},
          {"GPUOS_LT_OLD=new", "GPUOS_LT_NEW=a b=c"});
  ASSERT_NE(command, nullptr);
  std::optional<std::string> written = ReadFile(Path("env"));
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(*written, "GPUOS_LT_KEEP=kept\nGPUOS_LT_OLD=new\nGPUOS_LT_NEW=a b=c\n");
  // The tracer's own environment is left alone.
  EXPECT_STREQ(getenv("GPUOS_LT_OLD"), "old");
  EXPECT_EQ(getenv("GPUOS_LT_NEW"), nullptr);
}

TEST_F(LauncherTest, CommandDoesNotStartBeforeRelease) {
  std::unique_ptr<LaunchedCommand> command = Prepare({probe_, "stamp", Path("stamp")});
  ASSERT_NE(command, nullptr);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(fs::exists(Path("stamp")));
  // Still our own image, blocked (not yet exec'd, not running).
  const std::string proc = absl::StrCat("/proc/", command->pid());
  EXPECT_EQ(fs::read_symlink(proc + "/exe"), fs::read_symlink("/proc/self/exe"));
  std::optional<std::string> stat = ReadFile(proc + "/stat");
  ASSERT_TRUE(stat.has_value());
  const size_t paren = stat->rfind(')');
  ASSERT_NE(paren, std::string::npos);
  EXPECT_EQ(stat->substr(paren + 2, 1), "S");

  const long long released_at = MonotonicNs();
  ASSERT_TRUE(command->Release().ok());
  ASSERT_TRUE(RunToEnd(*command));
  EXPECT_EQ(command->exit_code(), 0);
  std::optional<std::string> stamp = ReadFile(Path("stamp"));
  ASSERT_TRUE(stamp.has_value());
  EXPECT_GE(std::stoll(*stamp), released_at);
}

TEST_F(LauncherTest, ReleaseTwiceIsAnError) {
  std::unique_ptr<LaunchedCommand> command = Prepare({probe_, "exit", "0"});
  ASSERT_NE(command, nullptr);
  ASSERT_TRUE(command->Release().ok());
  EXPECT_EQ(command->Release().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(RunToEnd(*command));
}

TEST_F(LauncherTest, EmptyArgvIsAnError) {
  absl::StatusOr<std::unique_ptr<LaunchedCommand>> command = LaunchedCommand::Prepare({});
  EXPECT_EQ(command.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LauncherTest, DroppedWithoutReleaseNeverRuns) {
  std::unique_ptr<LaunchedCommand> command = Prepare({probe_, "stamp", Path("stamp")});
  ASSERT_NE(command, nullptr);
  const pid_t pid = command->pid();
  command.reset();
  // Reaped by the destructor: the pid is gone, not a zombie.
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(fs::exists(Path("stamp")));
}

// Ctrl-C during setup kills the waiting child (it is in our process group);
// Release must then fail cleanly rather than SIGPIPE the tracer.
TEST_F(LauncherTest, ChildKilledBeforeReleaseFailsRelease) {
  std::unique_ptr<LaunchedCommand> command = Prepare({probe_, "stamp", Path("stamp")});
  ASSERT_NE(command, nullptr);
  ASSERT_EQ(kill(command->pid(), SIGINT), 0);
  siginfo_t info;
  ASSERT_EQ(waitid(P_PID, command->pid(), &info, WEXITED | WNOWAIT), 0);
  const absl::Status status = command->Release();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  ASSERT_TRUE(RunToEnd(*command));
  EXPECT_EQ(command->exit_code(), 128 + SIGINT);
  EXPECT_FALSE(fs::exists(Path("stamp")));
}

// A double-forked, setsid()ed worker outlives the command; it must come to
// us (subreaper) and be waited for.
TEST_F(LauncherTest, DaemonizedGrandchildIsReapedAndWaitedFor) {
  std::unique_ptr<LaunchedCommand> command = Prepare({probe_, "daemon", Path("daemon"), "400"});
  ASSERT_NE(command, nullptr);
  ASSERT_TRUE(command->Release().ok());
  bool command_ended_with_tree_alive = false;
  const auto deadline = steady_clock::now() + milliseconds(5000);
  bool done = false;
  while (!(done = command->ReapChildren()) && steady_clock::now() < deadline) {
    if (command->wait_status().has_value() && !fs::exists(Path("daemon")))
      command_ended_with_tree_alive = true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_TRUE(done) << "the tree did not end";
  EXPECT_TRUE(command_ended_with_tree_alive);
  EXPECT_EQ(command->exit_code(), 0);
  std::optional<std::string> written = ReadFile(Path("daemon"));
  ASSERT_TRUE(written.has_value()) << "ReapChildren returned true before the grandchild ended";
  EXPECT_EQ(*written, absl::StrCat("ppid=", getpid(), "\n"));
}

int SleepThenExit(void*) {
  struct timespec ts = {0, 300 * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return 0;
}

// A child whose exit signal is not SIGCHLD is still a child left to wait for.
TEST_F(LauncherTest, ChildWithoutSigchldCountsAsLeft) {
  std::unique_ptr<LaunchedCommand> command = Prepare({probe_, "exit", "0"});
  ASSERT_NE(command, nullptr);
  ASSERT_TRUE(command->Release().ok());
  std::vector<char> stack(256 * 1024);
  const auto started = steady_clock::now();
  const pid_t quiet = clone(SleepThenExit, stack.data() + stack.size(), 0, nullptr);
  ASSERT_GT(quiet, 0);
  ASSERT_TRUE(RunToEnd(*command));
  EXPECT_GE(steady_clock::now() - started, milliseconds(250))
      << "ReapChildren said no child was left while the clone()d child ran";
  EXPECT_EQ(command->exit_code(), 0);
}

// Runs `body` in a forked "tracer" that reports one pid back; returns
// {tracer pid, reported pid}.  The test process is made a subreaper so the
// tracer's orphans come back to it.
std::pair<pid_t, pid_t> ForkTracer(const std::function<pid_t()>& body) {
  EXPECT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  int fds[2];
  if (pipe(fds) != 0) return {-1, -1};
  const pid_t tracer = fork();
  if (tracer == 0) {
    close(fds[0]);
    const pid_t reported = body();
    if (write(fds[1], &reported, sizeof(reported)) != sizeof(reported)) _exit(1);
    pause();
    _exit(0);
  }
  close(fds[1]);
  pid_t reported = -1;
  if (read(fds[0], &reported, sizeof(reported)) != sizeof(reported)) reported = -1;
  close(fds[0]);
  return {tracer, reported};
}

TEST_F(LauncherTest, CommandSurvivesSigkillOfTracer) {
  const std::string done = Path("done");
  const std::string probe = probe_;
  auto [tracer, command_pid] = ForkTracer([&]() -> pid_t {
    LaunchOptions options;
    options.argv = {probe, "sleep", "800", done};
    auto command = LaunchedCommand::Prepare(options);
    if (!command.ok() || !(*command)->Release().ok()) _exit(1);
    const pid_t pid = (*command)->pid();
    command->release();  // the tracer dies holding it, as a SIGKILLed one would
    return pid;
  });
  ASSERT_GT(tracer, 0);
  ASSERT_GT(command_pid, 0) << "the tracer could not launch the command";
  ASSERT_EQ(kill(tracer, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(tracer, &status, 0), tracer);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(fs::exists(done)) << "the command should still be sleeping";

  std::optional<int> command_status = WaitForPid(command_pid);
  ASSERT_TRUE(command_status.has_value()) << "the command hung or was not re-parented to us";
  EXPECT_TRUE(WIFEXITED(*command_status)) << "killed by signal " << WTERMSIG(*command_status);
  EXPECT_EQ(WEXITSTATUS(*command_status), 0);
  EXPECT_EQ(ReadFile(done), "done\n");
}

TEST_F(LauncherTest, TracerDeathBeforeReleaseEndsChildQuietly) {
  const std::string stamp = Path("stamp");
  const std::string probe = probe_;
  auto [tracer, child_pid] = ForkTracer([&]() -> pid_t {
    LaunchOptions options;
    options.argv = {probe, "stamp", stamp};
    auto command = LaunchedCommand::Prepare(options);
    if (!command.ok()) _exit(1);
    const pid_t pid = (*command)->pid();
    command->release();  // no destructor: only the kernel closes the fds
    return pid;
  });
  ASSERT_GT(tracer, 0);
  ASSERT_GT(child_pid, 0);
  ASSERT_EQ(kill(tracer, SIGKILL), 0);
  ASSERT_EQ(waitpid(tracer, nullptr, 0), tracer);
  std::optional<int> status = WaitForPid(child_pid);
  ASSERT_TRUE(status.has_value()) << "the waiting child hung after its tracer died";
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 127);
  EXPECT_FALSE(fs::exists(stamp));
}

TEST_F(LauncherTest, SignalFromAnotherProcessIsForwarded) {
  SignalFdScope signals;
  ASSERT_GE(signals.fd(), 0);
  std::unique_ptr<LaunchedCommand> command = Prepare({probe_, "sleep", "30000"});
  ASSERT_NE(command, nullptr);
  ASSERT_TRUE(command->Release().ok());
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);  // as kill(1) or a scheduler would
  std::optional<signalfd_siginfo> info = signals.Next();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->ssi_signo, static_cast<uint32_t>(SIGTERM));
  EXPECT_EQ(info->ssi_code, SI_USER);
  ASSERT_TRUE(ShouldForwardSignal(info->ssi_code));
  command->Forward(info->ssi_signo);
  ASSERT_TRUE(RunToEnd(*command, milliseconds(2000))) << "the command was not stopped";
  EXPECT_EQ(command->exit_code(), 143);
}

TEST_F(LauncherTest, QueuedAndThreadDirectedSignalsAreForwarded) {
  SignalFdScope signals;
  ASSERT_GE(signals.fd(), 0);
  union sigval value;
  value.sival_int = 7;
  ASSERT_EQ(sigqueue(getpid(), SIGHUP, value), 0);
  std::optional<signalfd_siginfo> queued = signals.Next();
  ASSERT_TRUE(queued.has_value());
  EXPECT_EQ(queued->ssi_code, SI_QUEUE);
  EXPECT_TRUE(ShouldForwardSignal(queued->ssi_code));

  ASSERT_EQ(syscall(SYS_tgkill, getpid(), static_cast<pid_t>(syscall(SYS_gettid)), SIGINT), 0);
  std::optional<signalfd_siginfo> tkill = signals.Next();
  ASSERT_TRUE(tkill.has_value());
  EXPECT_EQ(tkill->ssi_code, SI_TKILL);
  EXPECT_TRUE(ShouldForwardSignal(tkill->ssi_code));
}

// Ctrl-C typed on a real (pseudo) terminal reaches the foreground process
// group with SI_KERNEL, which must not be forwarded a second time.
TEST_F(LauncherTest, TerminalInterruptIsNotForwarded) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const std::string slave = ptsname(master);
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    int32_t result[2] = {-1, -1};
    setsid();
    const int tty = open(slave.c_str(), O_RDWR);
    if (tty < 0 || ioctl(tty, TIOCSCTTY, 0) != 0) _exit(1);
    absl::StatusOr<int> fd = OpenSignalFd();
    if (!fd.ok()) _exit(1);
    if (write(report[1], result, 1) != 1) _exit(1);  // ready
    struct pollfd p = {*fd, POLLIN, 0};
    if (poll(&p, 1, 3000) == 1) {
      signalfd_siginfo info;
      if (read(*fd, &info, sizeof(info)) == sizeof(info)) {
        result[0] = static_cast<int32_t>(info.ssi_signo);
        result[1] = info.ssi_code;
      }
    }
    if (write(report[1], result, sizeof(result)) != sizeof(result)) _exit(1);
    _exit(0);
  }
  close(report[1]);
  char ready;
  ASSERT_EQ(read(report[0], &ready, 1), 1);
  ASSERT_EQ(write(master, "\x03", 1), 1);
  int32_t result[2] = {0, 0};
  ASSERT_EQ(read(report[0], result, sizeof(result)), static_cast<ssize_t>(sizeof(result)));
  close(report[0]);
  close(master);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(result[0], SIGINT);
  EXPECT_EQ(result[1], SI_KERNEL);
  EXPECT_FALSE(ShouldForwardSignal(result[1]));
}

TEST_F(LauncherTest, NotUnderSudoOrRunAsRootKeepsIdentity) {
  {
    ScopedEnv uid("SUDO_UID", nullptr);
    absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
    ASSERT_TRUE(run_as.ok()) << run_as.status();
    EXPECT_FALSE(run_as->drop_privileges);
  }
  {
    ScopedEnv uid("SUDO_UID", "not a number");  // ignored with run_as_root
    absl::StatusOr<RunAs> run_as = ResolveRunAs(true);
    ASSERT_TRUE(run_as.ok()) << run_as.status();
    EXPECT_FALSE(run_as->drop_privileges);
  }
}

class LauncherRootTest : public LauncherTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    LauncherTest::SetUp();
  }
  std::map<std::string, std::string> RunIds(const RunAs& run_as) {
    std::unique_ptr<LaunchedCommand> command = Run({probe_, "ids", Path("ids")}, run_as);
    if (command == nullptr) return {};
    EXPECT_EQ(command->exit_code(), 0);
    std::optional<std::string> written = ReadFile(Path("ids"));
    EXPECT_TRUE(written.has_value());
    fs::remove(Path("ids"));
    return written ? ParseLines(*written) : std::map<std::string, std::string>{};
  }
};

TEST_F(LauncherRootTest, MalformedSudoIdsAreErrors) {
  for (const char* bad : {"abc", "-1", " 1000", "1000 ", "+1000", "1000x", "", "0x10",
                          "4294967295", "99999999999"}) {
    {
      ScopedEnv uid("SUDO_UID", bad);
      ScopedEnv gid("SUDO_GID", "100");
      absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
      EXPECT_EQ(run_as.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
      EXPECT_NE(run_as.status().message().find("SUDO_UID"), absl::string_view::npos);
    }
    {
      ScopedEnv uid("SUDO_UID", "65534");
      ScopedEnv gid("SUDO_GID", bad);
      absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
      EXPECT_EQ(run_as.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
      EXPECT_NE(run_as.status().message().find("SUDO_GID"), absl::string_view::npos);
    }
  }
}

TEST_F(LauncherRootTest, SudoFromRootDropsNothing) {
  ScopedEnv uid("SUDO_UID", "0");
  ScopedEnv gid("SUDO_GID", "0");
  absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
  ASSERT_TRUE(run_as.ok()) << run_as.status();
  EXPECT_FALSE(run_as->drop_privileges);
}

TEST_F(LauncherRootTest, SudoGidDefaultsToThePasswdGroup) {
  struct passwd* pw = getpwuid(65534);
  ASSERT_NE(pw, nullptr) << "this test needs the 'nobody' user (65534)";
  const gid_t passwd_gid = pw->pw_gid;
  ScopedEnv uid("SUDO_UID", "65534");
  {
    ScopedEnv gid("SUDO_GID", nullptr);
    absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
    ASSERT_TRUE(run_as.ok()) << run_as.status();
    EXPECT_EQ(run_as->gid, passwd_gid);
  }
  {
    ScopedEnv gid("SUDO_GID", "4242");
    absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
    ASSERT_TRUE(run_as.ok()) << run_as.status();
    EXPECT_EQ(run_as->gid, 4242u);
  }
}

TEST_F(LauncherRootTest, UnderSudoRunsAsTheInvokingUser) {
  struct passwd* pw = getpwuid(65534);
  ASSERT_NE(pw, nullptr) << "this test needs the 'nobody' user (65534)";
  const std::string name = pw->pw_name;
  const std::string home = pw->pw_dir;
  ScopedEnv uid("SUDO_UID", "65534");
  ScopedEnv gid("SUDO_GID", "65534");
  absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
  ASSERT_TRUE(run_as.ok()) << run_as.status();
  ASSERT_TRUE(run_as->drop_privileges);
  EXPECT_EQ(run_as->uid, 65534u);
  EXPECT_EQ(run_as->gid, 65534u);
  EXPECT_EQ(run_as->user_name, name);
  EXPECT_EQ(run_as->home, home);

  // The groups the user has per NSS, and none of root's.
  std::vector<gid_t> groups(64);
  int n = groups.size();
  ASSERT_GE(getgrouplist(name.c_str(), 65534, groups.data(), &n), 0);
  groups.resize(n);
  std::sort(groups.begin(), groups.end());
  std::string expected_groups;
  for (gid_t g : groups) absl::StrAppend(&expected_groups, expected_groups.empty() ? "" : ",", g);

  std::map<std::string, std::string> ids = RunIds(*run_as);
  EXPECT_EQ(ids["uid"], "65534");
  EXPECT_EQ(ids["euid"], "65534");
  EXPECT_EQ(ids["gid"], "65534");
  EXPECT_EQ(ids["egid"], "65534");
  std::vector<std::string> got = absl::StrSplit(ids["groups"], ',');
  std::sort(got.begin(), got.end(), [](const std::string& a, const std::string& b) {
    return std::stoul(a) < std::stoul(b);
  });
  EXPECT_EQ(absl::StrJoin(got, ","), expected_groups);
  EXPECT_EQ(std::find(got.begin(), got.end(), "0"), got.end()) << "root's group kept";
  EXPECT_EQ(ids["HOME"], home);
  EXPECT_EQ(ids["USER"], name);
  EXPECT_EQ(ids["LOGNAME"], name);

  // --run-as-root: the same environment keeps root.
  absl::StatusOr<RunAs> as_root = ResolveRunAs(true);
  ASSERT_TRUE(as_root.ok());
  std::map<std::string, std::string> root_ids = RunIds(*as_root);
  EXPECT_EQ(root_ids["uid"], "0");
  EXPECT_EQ(root_ids["euid"], "0");
}

TEST_F(LauncherRootTest, UserWithoutPasswdEntryGetsOnlyItsGroup) {
  uid_t unused = 54321;
  while (getpwuid(unused) != nullptr) ++unused;
  const std::string id = std::to_string(unused);
  ScopedEnv uid("SUDO_UID", id.c_str());
  {
    ScopedEnv gid("SUDO_GID", nullptr);
    absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
    EXPECT_EQ(run_as.status().code(), absl::StatusCode::kInvalidArgument);
  }
  ScopedEnv gid("SUDO_GID", id.c_str());
  ScopedEnv home("HOME", "/tracer-home");
  absl::StatusOr<RunAs> run_as = ResolveRunAs(false);
  ASSERT_TRUE(run_as.ok()) << run_as.status();
  EXPECT_TRUE(run_as->user_name.empty());
  std::map<std::string, std::string> ids = RunIds(*run_as);
  EXPECT_EQ(ids["uid"], id);
  EXPECT_EQ(ids["gid"], id);
  EXPECT_EQ(ids["groups"], id);
  EXPECT_EQ(ids["HOME"], "/tracer-home");  // nothing better is known
}

// execvp answers EACCES when some PATH directory is closed to the user
// (root's ~/.cargo/bin under sudo -E); a name found nowhere is still "not
// found", not "Permission denied".
TEST_F(LauncherRootTest, MissingCommandBehindClosedPathDirIsNotFound) {
  const std::string closed = Path("closed");
  ASSERT_EQ(mkdir(closed.c_str(), 0700), 0);
  ScopedEnv path("PATH", (closed + ":/usr/bin:/bin").c_str());
  RunAs nobody;
  nobody.drop_privileges = true;
  nobody.uid = 65534;
  nobody.gid = 65534;
  std::unique_ptr<LaunchedCommand> command = Prepare({"gpuos-no-such-command-7f3a"}, nobody);
  ASSERT_NE(command, nullptr);
  const absl::Status status = command->Release();
  EXPECT_EQ(status.message(), "cannot run 'gpuos-no-such-command-7f3a': No such file or directory");
  ASSERT_TRUE(RunToEnd(*command));
  EXPECT_EQ(command->exit_code(), 127);
}

TEST_F(LauncherRootTest, PrivilegeDropFailureIsReported) {
  // A non-root "tracer" asked to drop privileges cannot set groups.
  const std::string probe = probe_;
  auto [tracer, code] = ForkTracer([&]() -> pid_t {
    if (setresuid(65534, 65534, 65534) != 0) _exit(1);
    LaunchOptions options;
    options.argv = {probe, "exit", "0"};
    options.run_as.drop_privileges = true;
    options.run_as.uid = 1234;
    options.run_as.gid = 1234;
    auto command = LaunchedCommand::Prepare(options);
    if (!command.ok()) return -2;
    const absl::Status status = (*command)->Release();
    const bool expected =
        status.message() == absl::StrCat("cannot run '", probe,
                                         "': setting the supplementary groups failed: "
                                         "Operation not permitted") &&
        (*command)->exit_code() == 127;
    RunToEnd(**command);
    return expected ? 1 : -3;
  });
  ASSERT_GT(tracer, 0);
  EXPECT_EQ(code, 1);
  kill(tracer, SIGKILL);
  waitpid(tracer, nullptr, 0);
}

}  // namespace
}  // namespace gpuos
