// InjectLibrary (agent/inject) against real processes: tests/workloads/
// injection_target, which checks every register of the thread the injector
// borrows and exits non-zero at the first disturbance, and
// injection_probe_lib, whose entry records its call and unmaps the stub
// pages.  Root only (ptrace of another user's process, /proc/PID/mem).
// Injections run in tests/workloads/injection_driver, so that a test can
// SIGKILL the caller and the guardian at each safe pause point.
#include <errno.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "inject/library_injector.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

using rt::Child;
using rt::ReadFile;
using rt::RunOptions;
using rt::RunResult;
using rt::TempDir;
using rt::WaitUntil;
using rt::WorkloadPath;

#define REQUIRE_ROOT()                                              \
  do {                                                              \
    if (!rt::IsRoot()) GTEST_SKIP() << "needs root (ptrace)";       \
  } while (0)

std::string ProbeLibrary() { return WorkloadPath("libinjection_probe_lib.so"); }
constexpr char kProbeEntry[] = "gpuos_probe_entry";

// "key=value key=value" of a one-line file or output.
std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> fields;
  for (absl::string_view word : absl::StrSplit(absl::StripAsciiWhitespace(line), ' ',
                                               absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(word, absl::MaxSplits('=', 1));
    fields[kv.first] = kv.second;
  }
  return fields;
}

std::string StatusValue(pid_t pid, pid_t tid, const std::string& key) {
  auto text = ReadFile(absl::StrFormat("/proc/%d/task/%d/status", pid, tid));
  if (!text) return "";
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::ConsumePrefix(&line, key + ":")) return std::string(absl::StripAsciiWhitespace(line));
  }
  return "";
}

// Every thread of `pid` is neither stopped nor traced.
::testing::AssertionResult RunningAndUntraced(pid_t pid) {
  auto listing = ReadFile(absl::StrFormat("/proc/%d/status", pid));
  if (!listing) return ::testing::AssertionFailure() << "pid " << pid << " is gone";
  std::string task_dir = absl::StrFormat("/proc/%d/task", pid);
  std::vector<std::string> bad;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(task_dir, ignored)) {
    pid_t tid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &tid)) continue;
    const std::string state = StatusValue(pid, tid, "State");
    const std::string tracer = StatusValue(pid, tid, "TracerPid");
    if (state.empty()) continue;  // exited meanwhile
    if (state[0] == 't' || state[0] == 'T' || tracer != "0") {
      bad.push_back(absl::StrFormat("tid %d: State %s TracerPid %s", tid, state, tracer));
    }
  }
  if (!bad.empty()) return ::testing::AssertionFailure() << absl::StrJoin(bad, "; ");
  return ::testing::AssertionSuccess();
}

bool MapsContain(pid_t pid, const std::string& needle) {
  auto maps = ReadFile(absl::StrFormat("/proc/%d/maps", pid));
  return maps && absl::StrContains(*maps, needle);
}

bool MappingStartsAt(pid_t pid, uint64_t address) {
  auto maps = ReadFile(absl::StrFormat("/proc/%d/maps", pid));
  return maps && absl::StrContains(*maps, absl::StrFormat("\n%x-", address));
}

// An injection_target run in its own temporary directory.
class Target {
 public:
  // hide_workloads: in a mount namespace of its own, where a tmpfs hides the
  // workloads folder (and so the probe library), as a container would.
  explicit Target(std::vector<std::string> flags, bool hide_workloads = false,
                  const std::string& program = "injection_target") {
    std::string binary = WorkloadPath(program);
    if (hide_workloads) {
      binary = dir_.File("injection_target");
      std::filesystem::copy_file(WorkloadPath(program), binary);
    }
    std::vector<std::string> argv = {binary, "--stop-file", dir_.File("stop"), "--ready-file",
                                     dir_.File("ready")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    if (hide_workloads) {
      std::string command = absl::StrFormat("mount -t tmpfs tmpfs '%s' && exec",
                                            WorkloadPath(""));
      for (const std::string& arg : argv) absl::StrAppend(&command, " '", arg, "'");
      argv = {"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", command};
    }
    child_.emplace(Child::Start(argv));
    ready_ = WaitUntil([&] { return ReadFile(dir_.File("ready")).has_value(); }, 10);
  }

  bool ready() const { return ready_; }
  pid_t pid() const { return child_->pid(); }
  const TempDir& dir() const { return dir_; }
  bool Alive() const { return waitpid(child_->pid(), nullptr, WNOHANG) == 0; }

  // Lets it run a little longer, stops it, and returns how it ended.
  RunResult Finish() {
    usleep(200 * 1000);
    rt::WriteFile(dir_.File("stop"), "");
    return child_->Wait(20);
  }

 private:
  TempDir dir_;
  std::optional<Child> child_;
  bool ready_ = false;
};

struct DriverOutcome {
  RunResult run;
  bool ok = false;
  std::map<std::string, std::string> fields;  // of "injected ..."
  std::string error;                          // of "error: ..."
};

DriverOutcome RunDriver(const std::string& pid, const std::string& library,
                        const std::string& symbol, const std::string& argument,
                        const RunOptions& options = {}) {
  DriverOutcome outcome;
  outcome.run = rt::Run({WorkloadPath("injection_driver"), pid, library, symbol, argument},
                        options);
  std::string out(absl::StripAsciiWhitespace(outcome.run.out));
  if (absl::StartsWith(out, "injected ")) {
    outcome.ok = outcome.run.exit_code == 0;
    outcome.fields = Fields(out.substr(9));
  } else if (absl::StartsWith(out, "error: ")) {
    outcome.error = out.substr(7);
  }
  return outcome;
}

// What the probe's entry recorded, once it has.
std::map<std::string, std::string> ProbeEntry(const std::string& argument, double timeout_s = 5) {
  std::optional<std::string> text;
  WaitUntil([&] { return (text = ReadFile(argument + ".entry")).has_value(); }, timeout_s);
  return text ? Fields(*text) : std::map<std::string, std::string>{};
}

std::map<std::string, std::string> ProbeUnmapped(const std::string& argument,
                                                 double timeout_s = 10) {
  std::optional<std::string> text;
  WaitUntil([&] { return (text = ReadFile(argument + ".unmapped")).has_value(); }, timeout_s);
  return text ? Fields(*text) : std::map<std::string, std::string>{};
}

uint64_t Hex(const std::string& text) {
  uint64_t value = 0;
  absl::SimpleHexAtoi(absl::StripPrefix(text, "0x"), &value);
  return value;
}

// One successful injection into `target`, checked end to end; returns the
// stopped time in microseconds.
double InjectAndCheck(Target& target, const std::string& argument, bool expect_main_thread) {
  DriverOutcome outcome =
      RunDriver(absl::StrCat(target.pid()), ProbeLibrary(), kProbeEntry, argument);
  EXPECT_TRUE(outcome.ok) << outcome.run.Describe();
  if (!outcome.ok) return -1;
  const pid_t tid = static_cast<pid_t>(std::stol(outcome.fields["tid"]));
  if (expect_main_thread) {
    EXPECT_EQ(tid, target.pid());
  }
  EXPECT_EQ(outcome.fields["path"], ProbeLibrary());

  auto entry = ProbeEntry(argument);
  EXPECT_EQ(entry["argument"], argument);
  EXPECT_EQ(entry["tid"], absl::StrCat(tid)) << "the entry's stub_tid";
  EXPECT_EQ(entry["gettid"], absl::StrCat(tid)) << "the entry ran on the borrowed thread";
  EXPECT_EQ(entry["pid"], absl::StrCat(target.pid()));
  EXPECT_EQ(entry["size"], "8192");
  const uint64_t page = Hex(entry["page"]);
  EXPECT_NE(page, 0u);

  EXPECT_TRUE(MapsContain(target.pid(), ProbeLibrary()));
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  auto unmapped = ProbeUnmapped(argument);
  EXPECT_EQ(unmapped["unmapped"], "1") << "the stub pages were not released";
  EXPECT_EQ(unmapped["rc"], "0");
  EXPECT_FALSE(MappingStartsAt(target.pid(), page)) << "stub page still mapped";

  const double stopped_us = std::stod(outcome.fields["stopped_us"]);
  printf("[ injected ] pid %d tid %s: stopped %.1f us, entry returned after %s us\n",
         target.pid(), outcome.fields["tid"].c_str(), stopped_us,
         outcome.fields["entry_us"].c_str());
  // Three trips through the scheduler: on a loaded machine one may wait tens
  // of ms for a CPU (RepeatedInjectionsStayShort holds the median to 50 ms).
  EXPECT_LT(stopped_us, 1e6) << "the target thread was stopped for too long";
  return stopped_us;
}

void ExpectCleanExit(Target& target) {
  RunResult result = target.Finish();
  EXPECT_EQ(result.exit_code, 0) << result.Describe();
  EXPECT_TRUE(absl::StartsWith(result.out.substr(result.out.find('\n') + 1), "ok "))
      << result.Describe();
}

class InjectIntoBlockingSyscall : public ::testing::TestWithParam<const char*> {};

TEST_P(InjectIntoBlockingSyscall, LoadsCallsAndLeavesTheTargetIntact) {
  REQUIRE_ROOT();
  Target target({"--mode", GetParam()});
  ASSERT_TRUE(target.ready());
  InjectAndCheck(target, target.dir().File("probe"), /*expect_main_thread=*/true);
  ExpectCleanExit(target);
}

// nanosleep and futex with a timeout restart through restart_syscall,
// futex without one re-issues itself (-ERESTARTSYS), select (-ERESTARTNOHAND).
INSTANTIATE_TEST_SUITE_P(Modes, InjectIntoBlockingSyscall,
                         ::testing::Values("nanosleep", "futex", "futex_timeout", "select"));

TEST(LibraryInjection, RepeatedInjectionsStayShort) {
  REQUIRE_ROOT();
  Target target({"--mode", "futex"});
  ASSERT_TRUE(target.ready());
  std::vector<double> stopped;
  for (int i = 0; i < 8; ++i) {
    stopped.push_back(
        InjectAndCheck(target, target.dir().File(absl::StrCat("probe", i)), true));
  }
  std::sort(stopped.begin(), stopped.end());
  printf("[ stopped  ] %zu injections: min %.1f us, median %.1f us, max %.1f us\n",
         stopped.size(), stopped.front(), stopped[stopped.size() / 2], stopped.back());
  EXPECT_LT(stopped[stopped.size() / 2], 50000) << "median stopped time";
  ExpectCleanExit(target);
}

TEST(LibraryInjection, BorrowsAHelperThreadWhenTheMainThreadIsBusy) {
  REQUIRE_ROOT();
  Target target({"--mode", "busy"});
  ASSERT_TRUE(target.ready());
  const std::string argument = target.dir().File("probe");
  DriverOutcome outcome = RunDriver(absl::StrCat(target.pid()), ProbeLibrary(), kProbeEntry,
                                    argument);
  ASSERT_TRUE(outcome.ok) << outcome.run.Describe();
  EXPECT_NE(outcome.fields["tid"], absl::StrCat(target.pid()));
  EXPECT_EQ(ProbeEntry(argument)["gettid"], outcome.fields["tid"]);
  EXPECT_EQ(ProbeUnmapped(argument)["unmapped"], "1");
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  ExpectCleanExit(target);
}

TEST(LibraryInjection, SurvivesSignalsArrivingMeanwhile) {
  REQUIRE_ROOT();
  // SIGALRM every 2 ms to any thread: signal stops and pending signals make
  // the guardian roll back and retry.
  Target target({"--mode", "futex", "--signals"});
  ASSERT_TRUE(target.ready());
  for (int i = 0; i < 4; ++i) {
    const std::string argument = target.dir().File(absl::StrCat("probe", i));
    DriverOutcome outcome = RunDriver(absl::StrCat(target.pid()), ProbeLibrary(), kProbeEntry,
                                      argument);
    EXPECT_TRUE(outcome.ok) << outcome.run.Describe();
    if (outcome.ok) {
      EXPECT_EQ(ProbeEntry(argument)["argument"], argument);
      EXPECT_EQ(ProbeUnmapped(argument)["unmapped"], "1");
    }
    EXPECT_TRUE(RunningAndUntraced(target.pid()));
  }
  ExpectCleanExit(target);
}

TEST(LibraryInjection, CopiesTheLibraryIntoAnotherMountNamespace) {
  REQUIRE_ROOT();
  Target target({"--mode", "futex"}, /*hide_workloads=*/true);
  ASSERT_TRUE(target.ready());
  ASSERT_FALSE(std::filesystem::exists(
      absl::StrFormat("/proc/%d/root%s", target.pid(), ProbeLibrary())))
      << "the target still sees the probe library";
  const std::string argument = target.dir().File("probe");
  DriverOutcome outcome = RunDriver(absl::StrCat(target.pid()), ProbeLibrary(), kProbeEntry,
                                    argument);
  ASSERT_TRUE(outcome.ok) << outcome.run.Describe();
  const std::string copy = outcome.fields["path"];
  EXPECT_TRUE(absl::StartsWith(copy, "/tmp/gpuos-inject-")) << copy;
  EXPECT_EQ(ProbeEntry(argument)["argument"], argument);
  EXPECT_EQ(ProbeUnmapped(argument)["unmapped"], "1");
  EXPECT_TRUE(MapsContain(target.pid(), copy));
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  ExpectCleanExit(target);
  unlink(copy.c_str());
}

// --- killing the caller and the guardian ---------------------------------

struct PausedDriver {
  std::optional<Child> child;
  pid_t guardian = 0;
};

// Starts the driver with GPUOS_INJECT_TEST_PAUSE=phase and waits for the
// guardian to announce the pause.
PausedDriver StartPausedDriver(Target& target, const std::string& phase,
                               const std::string& argument) {
  PausedDriver paused;
  const std::string err = target.dir().File("driver.err");
  const std::string command = absl::StrFormat(
      "exec '%s' %d '%s' %s '%s' 2>'%s'", WorkloadPath("injection_driver"), target.pid(),
      ProbeLibrary(), kProbeEntry, argument, err);
  RunOptions options;
  options.env = {"GPUOS_INJECT_TEST_PAUSE=" + phase};
  paused.child.emplace(Child::Start({"/bin/sh", "-c", command}, options));
  const std::string marker = absl::StrCat("gpuos-inject: paused at ", phase, " guardian=");
  std::optional<std::string> text;
  WaitUntil(
      [&] {
        text = ReadFile(err);
        return text && absl::StrContains(*text, marker) && absl::EndsWith(*text, "\n");
      },
      15);
  if (text && absl::StrContains(*text, marker)) {
    std::string rest = text->substr(text->find(marker) + marker.size());
    absl::SimpleAtoi(rest.substr(0, rest.find('\n')), &paused.guardian);
  }
  return paused;
}

bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  auto stat = ReadFile(absl::StrFormat("/proc/%d/stat", pid));
  return !stat || absl::StrContains(*stat, ") Z ");
}

class KillAtSafePoint : public ::testing::TestWithParam<const char*> {};

TEST_P(KillAtSafePoint, LeavesTheTargetRunningAndCorrect) {
  REQUIRE_ROOT();
  const std::string phase = GetParam();
  Target target({"--mode", "nanosleep"});
  ASSERT_TRUE(target.ready());
  const std::string argument = target.dir().File("probe");
  PausedDriver paused = StartPausedDriver(target, phase, argument);
  ASSERT_GT(paused.guardian, 0) << "no pause announced at " << phase;
  ASSERT_EQ(kill(paused.child->pid(), SIGKILL), 0);
  ASSERT_EQ(kill(paused.guardian, SIGKILL), 0);
  paused.child->Wait(10);
  ASSERT_TRUE(WaitUntil([&] { return Gone(paused.guardian); }, 10));

  ASSERT_TRUE(WaitUntil([&] { return static_cast<bool>(RunningAndUntraced(target.pid())); }, 5))
      << RunningAndUntraced(target.pid());
  usleep(300 * 1000);
  EXPECT_TRUE(target.Alive());
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  if (phase == "detached-stub-running") {
    // Detached means done: the stub needs nobody.
    EXPECT_EQ(ProbeEntry(argument)["argument"], argument);
    EXPECT_EQ(ProbeUnmapped(argument)["unmapped"], "1");
  } else {
    EXPECT_FALSE(MapsContain(target.pid(), ProbeLibrary()));
    EXPECT_FALSE(ReadFile(argument + ".entry").has_value());
  }
  ExpectCleanExit(target);
}

INSTANTIATE_TEST_SUITE_P(Phases, KillAtSafePoint,
                         ::testing::Values("seized-and-stopped", "page-mapped-and-regs-restored",
                                           "stub-written", "detached-stub-running"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(LibraryInjection, GuardianFinishesWhenItsCallerIsKilled) {
  REQUIRE_ROOT();
  Target target({"--mode", "futex"});
  ASSERT_TRUE(target.ready());
  const std::string argument = target.dir().File("probe");
  PausedDriver paused = StartPausedDriver(target, "seized-and-stopped", argument);
  ASSERT_GT(paused.guardian, 0);
  ASSERT_EQ(kill(paused.child->pid(), SIGKILL), 0);
  paused.child->Wait(10);
  // The guardian sleeps out its pause, then completes the injection.
  EXPECT_EQ(ProbeEntry(argument, 10)["argument"], argument);
  EXPECT_EQ(ProbeUnmapped(argument)["unmapped"], "1");
  EXPECT_TRUE(WaitUntil([&] { return Gone(paused.guardian); }, 10));
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  ExpectCleanExit(target);
}

// --- refusals --------------------------------------------------------------

absl::Status Inject(pid_t pid, const std::string& library = ProbeLibrary(),
                    const std::string& symbol = kProbeEntry) {
  InjectionRequest request;
  request.pid = pid;
  request.library_path = library;
  request.entry_symbol = symbol;
  request.entry_argument = "/dev/null";
  return InjectLibrary(request).status();
}

TEST(LibraryInjectionErrors, NonexistentPid) {
  REQUIRE_ROOT();
  pid_t pid = 4000000;
  while (pid > 2 && kill(pid, 0) == 0) --pid;
  absl::Status status = Inject(pid);
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "no process with pid")) << status;
}

TEST(LibraryInjectionErrors, KernelThread) {
  REQUIRE_ROOT();
  absl::Status status = Inject(2);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "kernel thread")) << status;
}

TEST(LibraryInjectionErrors, ItsOwnProcess) {
  REQUIRE_ROOT();
  absl::Status status = Inject(getpid());
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "itself")) << status;
  DriverOutcome outcome = RunDriver("self", ProbeLibrary(), kProbeEntry, "/dev/null");
  EXPECT_EQ(outcome.run.exit_code, 1) << outcome.run.Describe();
  EXPECT_TRUE(absl::StrContains(outcome.error, "itself")) << outcome.run.Describe();
}

TEST(LibraryInjectionErrors, AlreadyTraced) {
  REQUIRE_ROOT();
  Target target({"--mode", "nanosleep"});
  ASSERT_TRUE(target.ready());
  pid_t tracer = fork();
  ASSERT_GE(tracer, 0);
  if (tracer == 0) {
    // Holds a seize until killed; the kernel detaches on our death.
    if (ptrace(PTRACE_SEIZE, target.pid(), nullptr, nullptr) != 0) _exit(1);
    for (;;) pause();
  }
  ASSERT_TRUE(WaitUntil(
      [&] { return StatusValue(target.pid(), target.pid(), "TracerPid") == absl::StrCat(tracer); },
      5));
  absl::Status status = Inject(target.pid());
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("already traced by pid ", tracer)))
      << status;
  kill(tracer, SIGKILL);
  waitpid(tracer, nullptr, 0);
  EXPECT_TRUE(WaitUntil([&] { return static_cast<bool>(RunningAndUntraced(target.pid())); }, 5));
  ExpectCleanExit(target);
}

TEST(LibraryInjectionErrors, NotPermittedForAnotherUser) {
  REQUIRE_ROOT();
  Target target({"--mode", "nanosleep"});
  ASSERT_TRUE(target.ready());
  RunOptions as_nobody;
  as_nobody.uid = 65534;
  as_nobody.gid = 65534;
  DriverOutcome outcome = RunDriver(absl::StrCat(target.pid()), ProbeLibrary(), kProbeEntry,
                                    "/dev/null", as_nobody);
  EXPECT_EQ(outcome.run.exit_code, 1) << outcome.run.Describe();
  EXPECT_TRUE(absl::StrContains(outcome.error, "PERMISSION_DENIED")) << outcome.run.Describe();
  EXPECT_TRUE(absl::StrContains(outcome.error, "CAP_SYS_PTRACE")) << outcome.run.Describe();
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  ExpectCleanExit(target);
}

TEST(LibraryInjectionErrors, UnreadableOrWrongLibrary) {
  REQUIRE_ROOT();
  Target target({"--mode", "nanosleep", "--no-helpers"});
  ASSERT_TRUE(target.ready());
  absl::Status missing = Inject(target.pid(), "/nonexistent/libnothing.so");
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_TRUE(absl::StrContains(missing.message(), "does not exist")) << missing;
  absl::Status relative = Inject(target.pid(), "libinjection_probe_lib.so");
  EXPECT_TRUE(absl::IsInvalidArgument(relative)) << relative;
  const std::string text_file = target.dir().File("not_a_library.so");
  rt::WriteFile(text_file, "hello\n");
  absl::Status not_elf = Inject(target.pid(), text_file);
  EXPECT_TRUE(absl::StrContains(not_elf.message(), "not an ELF file")) << not_elf;
  ExpectCleanExit(target);
}

TEST(LibraryInjectionErrors, MissingEntrySymbolReportsDlerror) {
  REQUIRE_ROOT();
  Target target({"--mode", "futex"});
  ASSERT_TRUE(target.ready());
  absl::Status status = Inject(target.pid(), ProbeLibrary(), "no_such_entry");
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "undefined symbol: no_such_entry")) << status;
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  // The stub dlclosed the library again.
  EXPECT_TRUE(WaitUntil([&] { return !MapsContain(target.pid(), ProbeLibrary()); }, 2));
  ExpectCleanExit(target);
}

TEST(LibraryInjectionErrors, StaticProgramWithoutCLibrary) {
  REQUIRE_ROOT();
  Target target({"--mode", "nanosleep"}, false, "injection_target_static");
  ASSERT_TRUE(target.ready());
  absl::Status status = Inject(target.pid());
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "no C library is mapped")) << status;
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  ExpectCleanExit(target);
}

TEST(LibraryInjectionErrors, EntryOutlastingTheTimeout) {
  REQUIRE_ROOT();
  Target target({"--mode", "futex"});
  ASSERT_TRUE(target.ready());
  const std::string argument = target.dir().File("probe");
  InjectionRequest request;
  request.pid = target.pid();
  request.library_path = ProbeLibrary();
  request.entry_symbol = "gpuos_probe_slow_entry";
  request.entry_argument = argument;
  request.timeout = absl::Milliseconds(500);
  absl::Status status = InjectLibrary(request).status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "had not returned after 0.5 s")) << status;
  // The thread finishes the stub on its own and goes back to its work.
  EXPECT_EQ(ProbeEntry(argument, 10)["argument"], argument);
  EXPECT_EQ(ProbeUnmapped(argument)["unmapped"], "1");
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  ExpectCleanExit(target);
}

TEST(LibraryInjectionErrors, NoThreadInASafeWait) {
  REQUIRE_ROOT();
  Target target({"--mode", "busy", "--no-helpers"});
  ASSERT_TRUE(target.ready());
  const double start = rt::MonotonicSeconds();
  absl::Status status = Inject(target.pid());
  const double took = rt::MonotonicSeconds() - start;
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "no thread of pid")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "running")) << status;
  EXPECT_LT(took, 5.0);
  EXPECT_TRUE(RunningAndUntraced(target.pid()));
  ExpectCleanExit(target);
}

}  // namespace
}  // namespace gpuos
