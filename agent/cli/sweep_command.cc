// `gpuos-trace sweep`; see sweep_command.h.
#include "cli/sweep_command.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "cli/compare_command.h"

namespace gpuos {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void OnStopSignal(int signo) { g_stop_signal = signo; }

double Now() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string ExitText(int status) {
  if (WIFEXITED(status)) return absl::StrFormat("exit %d", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrFormat("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return "ended abnormally";
}

// Runs `argv` with stdout and stderr into `log`; the wait status, or -1.
int RunLogged(const std::vector<std::string>& argv, const std::string& log, std::string* error) {
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = absl::StrFormat("cannot create %s: %s", log, strerror(errno));
    return -1;
  }
  std::vector<char*> cargv;
  for (const std::string& arg : argv) cargv.push_back(const_cast<char*>(arg.c_str()));
  cargv.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) {
    *error = absl::StrFormat("fork: %s", strerror(errno));
    close(fd);
    return -1;
  }
  if (child == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    execv("/proc/self/exe", cargv.data());
    dprintf(STDERR_FILENO, "gpuos-trace sweep: cannot run /proc/self/exe: %s\n", strerror(errno));
    _exit(127);
  }
  close(fd);
  int status = 0;
  bool forwarded = false;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      *error = absl::StrFormat("waitpid: %s", strerror(errno));
      return -1;
    }
    // Ctrl-C reaches the run's tracer from the terminal; other stop signals
    // are passed on, once.
    if (g_stop_signal && g_stop_signal != SIGINT && !forwarded) {
      kill(child, g_stop_signal);
      forwarded = true;
    }
  }
  return status;
}

}  // namespace

std::string SweepRunFileName(size_t index, const std::string& run_name, const std::string& extension) {
  std::string safe;
  for (char c : run_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '=' || c == ',' || c == '+' || c == '-';
    safe += ok ? c : '_';
  }
  if (safe.size() > 120) safe.resize(120);
  if (!safe.empty() && safe[0] == '.') safe[0] = '_';
  return absl::StrFormat("%02d-%s%s", index + 1, safe, extension);
}

int RunSweep(const SweepCommand& command) {
  std::error_code ec;
  std::filesystem::create_directories(command.output_dir, ec);
  if (ec) {
    fprintf(stderr, "gpuos-trace: sweep: cannot create %s: %s\n", command.output_dir.c_str(), ec.message().c_str());
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnStopSignal;  // no SA_RESTART: waitpid returns EINTR
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) sigaction(signo, &action, nullptr);

  std::vector<CompareInput> inputs;
  bool any_failed = false;
  const size_t total = command.runs.size();
  for (size_t i = 0; i < total; ++i) {
    const SweepRun& run = command.runs[i];
    CompareInput in;
    in.name = run.name;
    in.path = command.output_dir + "/" + SweepRunFileName(i, run.name, ".gpuos");
    in.batch_size = command.batch_size;
    in.argv = run.command;
    if (g_stop_signal) {
      in.failed = "not run (interrupted)";
      inputs.push_back(in);
      continue;
    }
    const std::string log = command.output_dir + "/" + SweepRunFileName(i, run.name, ".log");
    std::vector<std::string> argv = {"gpuos-trace"};
    argv.insert(argv.end(), run.record_args.begin(), run.record_args.end());
    argv.insert(argv.end(), {"-o", in.path, "--"});
    argv.insert(argv.end(), run.command.begin(), run.command.end());
    fprintf(stderr, "gpuos-trace: sweep run %zu/%zu %s ...\n", i + 1, total, run.name.c_str());
    const double start = Now();
    std::string error;
    const int status = RunLogged(argv, log, &error);
    if (status == -1) {
      in.failed = "failed: " + error;
    } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      in.failed = "failed: " + ExitText(status);
    }
    if (in.failed.empty()) {
      fprintf(stderr, "gpuos-trace: sweep run %zu/%zu %s: done in %.1f s -> %s\n", i + 1, total, run.name.c_str(),
              Now() - start, in.path.c_str());
    } else {
      any_failed = true;
      fprintf(stderr, "gpuos-trace: sweep run %zu/%zu %s: %s after %.1f s (see %s)\n", i + 1, total,
              run.name.c_str(), in.failed.c_str(), Now() - start, log.c_str());
    }
    inputs.push_back(in);
  }
  // A knee runs along one setting that grows: with several, the runs are a
  // grid; with names (variant=baseline,pinned) they have no order.
  std::optional<double> knee;
  std::string no_knee;
  if (command.settings.size() > 1) {
    no_knee = "several --set: the runs form a grid, not a line";
  } else {
    for (const std::string& value : command.settings[0].values) {
      double number = 0;
      if (!absl::SimpleAtod(value, &number)) {
        no_knee = "the values of --set " + command.settings[0].name + " are not all numbers";
      }
    }
  }
  if (no_knee.empty()) knee = command.knee_threshold;
  const Comparison comparison = CompareRuns(inputs, command.steps, knee);
  const int printed = PrintComparison(comparison, command.json, command.html_path);
  if (!no_knee.empty()) fprintf(stderr, "gpuos-trace: sweep: no knee: %s\n", no_knee.c_str());
  if (g_stop_signal) return 130;
  return any_failed || printed != 0 ? 1 : 0;
}

}  // namespace gpuos
