// The traced command's life under the real gpuos-trace: its exit status
// comes back as gpuos-trace's, signals sent to the tracer reach it, it runs
// as the sudo user (or root with --run-as-root), and it carries on to a
// normal end when the tracer is SIGKILLed.  Needs root (eBPF).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

rt::RunResult Trace(const std::string& trace_path, const std::vector<std::string>& command,
                    const rt::RunOptions& options = {}) {
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", trace_path, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return rt::Run(argv, options);
}

// The pid of the tracer's child once it runs `comm` (i.e. it was released
// and exec'd), or -1.
pid_t WaitForCommand(pid_t tracer, const std::string& comm, double timeout_s = 30) {
  pid_t found = -1;
  rt::WaitUntil(
      [&] {
        for (pid_t child : rt::ChildrenOf(tracer)) {
          if (rt::CommOf(child) == comm) {
            found = child;
            return true;
          }
        }
        return false;
      },
      timeout_s);
  return found;
}

TEST(TracerLifecycle, ExitCodeOfTheCommandIsPassedThrough) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  struct Case {
    std::vector<std::string> command;
    int exit_code;
  };
  for (const Case& c : std::vector<Case>{{{"/bin/true"}, 0},
                                         {{"/bin/sh", "-c", "exit 7"}, 7},
                                         {{"/bin/sh", "-c", "kill -9 $$"}, 128 + SIGKILL}}) {
    SCOPED_TRACE(c.command.back());
    const std::string trace = dir.File(absl::StrCat("exit", c.exit_code, ".gpuos"));
    rt::RunResult r = Trace(trace, c.command);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.Describe();
    EXPECT_TRUE(r.ErrorLines().empty()) << r.err;
    // The trailer keeps the real wait status.
    auto contents = rt::ReadTrace(trace);
    ASSERT_TRUE(contents.ok()) << contents.status();
    ASSERT_TRUE(contents->has_trailer);
    EXPECT_TRUE(contents->trailer.root_exited());
    const int status = contents->trailer.root_wait_status();
    if (c.exit_code == 128 + SIGKILL) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    } else {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == c.exit_code) << status;
    }
  }
}

TEST(TracerLifecycle, CommandNotFoundExits127WithOneLine) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  for (const std::string& command : {std::string("/nonexistent/no-such-command"),
                                     std::string("no-such-command-in-path")}) {
    SCOPED_TRACE(command);
    rt::RunResult r = Trace(dir.File("notfound.gpuos"), {command, "arg"});
    EXPECT_EQ(r.exit_code, 127) << r.Describe();
    const std::vector<std::string> lines = r.ErrorLines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_TRUE(absl::StrContains(lines[0], command)) << lines[0];
    EXPECT_TRUE(absl::StrContains(lines[0], "No such file or directory")) << lines[0];
    EXPECT_LT(r.seconds, 20) << "no hang";
  }
}

TEST(TracerLifecycle, SigtermToTheTracerEndsTheCommand) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("sigterm.gpuos");
  rt::Child tracer = rt::Child::Start({rt::TracerPath(), "-q", "-o", trace, "--", "sleep", "30"});
  ASSERT_GT(WaitForCommand(tracer.pid(), "sleep"), 0) << "the command never started";
  const double sent = rt::MonotonicSeconds();
  tracer.Signal(SIGTERM);  // kill(2): SI_USER, so it is forwarded
  rt::RunResult r = tracer.Wait(25);
  EXPECT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.Describe();
  EXPECT_LT(rt::MonotonicSeconds() - sent, 10) << "sleep 30 should have ended at once";
  auto contents = rt::ReadTrace(trace);
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_TRUE(contents->has_trailer) << "the tracer itself ended cleanly";
  const int status = contents->trailer.root_wait_status();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
}

TEST(TracerLifecycle, UnderSudoTheCommandRunsAsTheInvokingUser) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  dir.MakeWorldWritable();
  rt::RunOptions sudo;
  sudo.env = {"SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody"};
  const std::vector<std::string> ids = {"/bin/sh", "-c", "id -u; id -g; touch \"$0\"",
                                        dir.File("made-by-command")};

  const std::string dropped = dir.File("dropped.gpuos");
  rt::RunResult r = Trace(dropped, ids, sudo);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "65534\n65534\n");
  struct stat st;
  ASSERT_EQ(stat(dropped.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "the trace belongs to the user";
  EXPECT_EQ(st.st_gid, 65534u);
  ASSERT_EQ(stat(dir.File("made-by-command").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  auto contents = rt::ReadTrace(dropped);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->header.run_as_uid(), 65534u);
  EXPECT_EQ(contents->header.run_as_gid(), 65534u);

  const std::string kept = dir.File("kept.gpuos");
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "--run-as-root", "-o", kept, "--"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  r = rt::Run(argv, sudo);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "0\n0\n");
  ASSERT_EQ(stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

// The orphaned command is re-parented to the nearest subreaper: this test
// process, for as long as the test runs, so that it can see it end.
class SubreaperScope {
 public:
  SubreaperScope() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }
  ~SubreaperScope() { prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); }
};

TEST(TracerLifecycle, CommandSurvivesSigkillOfTheTracerAndEndsNormally) {
  GPUOS_REQUIRE_ROOT();
  SubreaperScope subreaper;
  rt::TempDir dir;
  const std::string report = dir.File("report.txt");
  // About half a second of work in every thread, then a normal exit.
  rt::Child tracer = rt::Child::Start(
      {rt::TracerPath(), "-q", "-o", dir.File("killed.gpuos"), "--",
       rt::WorkloadPath("ground_truth"), "--threads", "1", "--workers", "1", "--worker-threads",
       "1", "--sleeps", "25", "--sleep-us", "20000", "--report", report});
  const pid_t command = WaitForCommand(tracer.pid(), "gt-root");
  ASSERT_GT(command, 0) << "the command never started";
  kill(tracer.pid(), SIGKILL);
  rt::RunResult killed = tracer.Wait(10);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);

  std::optional<int> status = rt::WaitForPid(command, 30);
  ASSERT_TRUE(status.has_value()) << "the command hung or was not re-parented here";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  // Every thread of the tree finished its work: root + thread, worker +
  // thread, grandchild + thread.
  EXPECT_EQ(rt::ReadGroundTruthReport(report).size(), 6u);
}

}  // namespace
}  // namespace gpuos
