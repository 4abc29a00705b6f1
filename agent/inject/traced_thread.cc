// ptrace on one thread; see traced_thread.h.
#include "inject/traced_thread.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

#include "absl/strings/str_format.h"
#include "inject/remote_process.h"

namespace gpuos::inject {

absl::StatusOr<TracedThread> TracedThread::Seize(pid_t pid, pid_t tid) {
  if (ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0) {
    const int err = errno;
    if (err == ESRCH) {
      return absl::NotFoundError(absl::StrFormat("thread %d of pid %d is gone", tid, pid));
    }
    if (err == EPERM) {
      return absl::PermissionDeniedError(
          absl::StrFormat("PTRACE_SEIZE of thread %d of pid %d: %s", tid, pid, strerror(err)));
    }
    return absl::InternalError(
        absl::StrFormat("PTRACE_SEIZE of thread %d of pid %d: %s", tid, pid, strerror(err)));
  }
  return TracedThread(pid, tid);
}

absl::Status TracedThread::Request(int request, const char* name, void* addr, void* data) {
  if (ptrace(static_cast<enum __ptrace_request>(request), tid_, addr, data) == 0) {
    return absl::OkStatus();
  }
  const int err = errno;
  if (err == ESRCH) {
    return absl::NotFoundError(
        absl::StrFormat("%s: thread %d of pid %d is gone or not stopped", name, tid_, pid_));
  }
  return absl::InternalError(
      absl::StrFormat("%s on thread %d of pid %d: %s", name, tid_, pid_, strerror(err)));
}

absl::Status TracedThread::Interrupt() {
  return Request(PTRACE_INTERRUPT, "PTRACE_INTERRUPT", nullptr, nullptr);
}

absl::Status TracedThread::GetRegisters(struct user_regs_struct* regs) {
  return Request(PTRACE_GETREGS, "PTRACE_GETREGS", nullptr, regs);
}

absl::Status TracedThread::SetRegisters(const struct user_regs_struct& regs) {
  return Request(PTRACE_SETREGS, "PTRACE_SETREGS", nullptr,
                 const_cast<struct user_regs_struct*>(&regs));
}

absl::Status TracedThread::ResumeToSyscall() {
  return Request(PTRACE_SYSCALL, "PTRACE_SYSCALL", nullptr, nullptr);
}

absl::Status TracedThread::Continue(int signal) {
  return Request(PTRACE_CONT, "PTRACE_CONT", nullptr,
                 reinterpret_cast<void*>(static_cast<intptr_t>(signal)));
}

absl::Status TracedThread::Detach(int signal) {
  return Request(PTRACE_DETACH, "PTRACE_DETACH", nullptr,
                 reinterpret_cast<void*>(static_cast<intptr_t>(signal)));
}

absl::StatusOr<ThreadStop> TracedThread::WaitForStop(int64_t timeout_ns) {
  const int64_t deadline = MonotonicNanos() + timeout_ns;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  for (;;) {
    int status = 0;
    pid_t got = waitpid(tid_, &status, __WALL | WNOHANG);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      if (errno == ECHILD) return ThreadStop{StopKind::kGone, 0};
      return absl::InternalError(absl::StrFormat("waitpid(%d): %s", tid_, strerror(errno)));
    }
    if (got == tid_) {
      if (WIFEXITED(status) || WIFSIGNALED(status)) return ThreadStop{StopKind::kGone, 0};
      if (!WIFSTOPPED(status)) continue;
      const int sig = WSTOPSIG(status);
      const int event = status >> 16;
      if (event == PTRACE_EVENT_STOP) {
        // PTRACE_INTERRUPT's stop reports SIGTRAP; a group stop its signal.
        if (sig == SIGTRAP) return ThreadStop{StopKind::kEventStop, 0};
        return ThreadStop{StopKind::kGroupStop, sig};
      }
      if (event != 0) {
        // No other PTRACE_O_TRACE* option is set; treat as a plain stop.
        return ThreadStop{StopKind::kEventStop, 0};
      }
      if (sig == (SIGTRAP | 0x80)) return ThreadStop{StopKind::kSyscallStop, 0};
      return ThreadStop{StopKind::kSignalStop, sig};
    }
    const int64_t left = deadline - MonotonicNanos();
    if (left <= 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "thread %d of pid %d did not stop within %.0f ms", tid_, pid_, timeout_ns / 1e6));
    }
    // SIGCHLD tells of the stop; signals merge, so look again at least
    // every 2 ms anyway.
    struct timespec wait = {0, static_cast<long>(std::min<int64_t>(left, 2000000))};
    sigtimedwait(&chld, nullptr, &wait);
  }
}

}  // namespace gpuos::inject
