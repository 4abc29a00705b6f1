// The guardian process and its reply pipe; see injection_guardian.h.
#include "inject/injection_guardian.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_format.h"
#include "inject/injection_debug.h"
#include "inject/remote_process.h"

namespace gpuos::inject {
namespace {

// One write of less than PIPE_BUF bytes: arrives whole or not at all.
struct GuardianReply {
  int32_t code = 0;  // absl::StatusCode
  int32_t hijacked_tid = 0;
  int32_t guardian_pid = 0;
  int32_t reserved = 0;
  int64_t stopped_ns = 0;
  int64_t until_entry_returned_ns = 0;
  char message[1900] = {};
};
static_assert(sizeof(GuardianReply) < 4096, "the reply must fit one atomic pipe write");

void CloseAllBut(int keep) {
  // close_range (Linux 5.9) where there is one; else /proc/self/fd.
  bool closed = true;
  if (keep > 3 && syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u) != 0) {
    closed = false;
  }
  if (closed && syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0) return;
  std::vector<int> fds;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (struct dirent* entry = readdir(dir)) {
      int fd = atoi(entry->d_name);
      if (fd > 2 && fd != keep && fd != dirfd(dir)) fds.push_back(fd);
    }
    closedir(dir);
  }
  for (int fd : fds) close(fd);
}

void WriteReply(int fd, const GuardianReply& reply) {
  const char* bytes = reinterpret_cast<const char*>(&reply);
  size_t done = 0;
  while (done < sizeof(reply)) {
    ssize_t n = write(fd, bytes + done, sizeof(reply) - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // gpuos-trace is gone; nobody to tell
    done += static_cast<size_t>(n);
  }
}

[[noreturn]] void GuardianMain(const InjectionPlan& plan, int reply_fd) {
  setsid();
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  // Default SIGCHLD (blocked): ptrace stops are then reported with it, and
  // gpuos-trace's SA_NOCLDSTOP or SIG_IGN, if any, do not carry over.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);
  prctl(PR_SET_NAME, "gpuos-inject", 0, 0, 0);
  // The target thread is stopped while we wait for the CPU: be first in
  // line on a busy machine (root may; otherwise this fails harmlessly).
  setpriority(PRIO_PROCESS, 0, -20);
  if (int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
    ssize_t ignored = write(fd, "-1000", 5);
    (void)ignored;
    close(fd);
  }
  if (int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC); null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    if (null_fd > STDERR_FILENO && null_fd != reply_fd) close(null_fd);
  }
  CloseAllBut(reply_fd);
  if (chdir("/") != 0) {
    // Only keeps a mount busy a little longer.
  }

  GuardianReply reply;
  reply.guardian_pid = getpid();
  InjectionDebugLog("guardian started");
  auto result = RunInjectionTransaction(plan);
  InjectionDebugLog("guardian done");
  if (result.ok()) {
    reply.code = static_cast<int32_t>(absl::StatusCode::kOk);
    reply.hijacked_tid = result->hijacked_tid;
    reply.stopped_ns = result->stopped_ns;
    reply.until_entry_returned_ns = result->until_entry_returned_ns;
  } else {
    reply.code = static_cast<int32_t>(result.status().code());
    snprintf(reply.message, sizeof(reply.message), "%s",
             std::string(result.status().message()).c_str());
  }
  WriteReply(reply_fd, reply);
  _exit(0);
}

}  // namespace

absl::StatusOr<TransactionResult> RunInGuardian(const InjectionPlan& plan) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot make the injection guardian's pipe: %s", strerror(errno)));
  }
  const pid_t middle = fork();
  if (middle < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot fork the injection guardian: %s", strerror(err)));
  }
  if (middle == 0) {
    close(fds[0]);
    const pid_t guardian = fork();
    if (guardian == 0) GuardianMain(plan, fds[1]);
    _exit(guardian < 0 ? 1 : 0);
  }
  close(fds[1]);
  int middle_status = 0;
  while (waitpid(middle, &middle_status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(middle_status) || WEXITSTATUS(middle_status) != 0) {
    close(fds[0]);
    return absl::ResourceExhaustedError("cannot fork the injection guardian");
  }

  // Thread choice may poll ~3 s, one attempt waits up to 0.5 s for a stop,
  // then the entry gets plan.timeout_ns; the test pause adds 3 s.
  const int64_t budget = plan.timeout_ns + 10'000'000'000 + (plan.pause_phase.empty() ? 0 : 3'000'000'000);
  const int64_t deadline = MonotonicNanos() + budget;
  GuardianReply reply;
  char* bytes = reinterpret_cast<char*>(&reply);
  size_t got = 0;
  while (got < sizeof(reply)) {
    const int64_t left = deadline - MonotonicNanos();
    if (left <= 0) break;
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left / 1000000 + 1, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    ssize_t n = read(fds[0], bytes + got, sizeof(reply) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  if (got == 0 && MonotonicNanos() >= deadline) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "the injection guardian for pid %d did not answer within %.0f s; it finishes or rolls back "
        "on its own",
        plan.pid, budget / 1e9));
  }
  if (got < sizeof(reply)) {
    return absl::InternalError(absl::StrFormat(
        "the injection guardian for pid %d died without answering (killed?); pid %d may or may "
        "not have loaded the library",
        plan.pid, plan.pid));
  }
  reply.message[sizeof(reply.message) - 1] = '\0';
  if (reply.code != static_cast<int32_t>(absl::StatusCode::kOk)) {
    return absl::Status(static_cast<absl::StatusCode>(reply.code), reply.message);
  }
  TransactionResult result;
  result.hijacked_tid = reply.hijacked_tid;
  result.stopped_ns = reply.stopped_ns;
  result.until_entry_returned_ns = reply.until_entry_returned_ns;
  return result;
}

}  // namespace gpuos::inject
