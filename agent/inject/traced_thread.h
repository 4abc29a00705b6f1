// One thread of another process held with PTRACE_SEIZE: interrupting it,
// waiting for its stops (with a timeout, which waitpid lacks), reading and
// setting its registers, resuming and detaching.  Only this thread stops;
// the others of its process keep running.  Used by the injection guardian,
// which must keep SIGCHLD blocked (the waits take it with sigtimedwait).
//
// If the process holding a TracedThread dies, the kernel detaches the
// thread and lets it run on with whatever registers it has then, and with
// the signal of a signal-delivery stop delivered: the guardian's transaction
// is ordered so that this is harmless except inside one short window.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuos::inject {

enum class StopKind {
  kEventStop,    // PTRACE_EVENT_STOP of PTRACE_INTERRUPT (no signal involved)
  kGroupStop,    // the process is being stopped (SIGSTOP and friends)
  kSyscallStop,  // entry or exit of a syscall (PTRACE_SYSCALL)
  kSignalStop,   // a signal is about to be delivered to the thread
  kGone,         // the thread exited or was killed
};

struct ThreadStop {
  StopKind kind = StopKind::kGone;
  int signal = 0;  // kSignalStop / kGroupStop: the signal
};

class TracedThread {
 public:
  // PTRACE_SEIZE with PTRACE_O_TRACESYSGOOD: syscall stops report
  // SIGTRAP|0x80, which, should we die while the thread sits in one, the
  // kernel cannot deliver as a signal (a plain SIGTRAP would kill it).
  static absl::StatusOr<TracedThread> Seize(pid_t pid, pid_t tid);

  pid_t pid() const { return pid_; }
  pid_t tid() const { return tid_; }

  absl::Status Interrupt();
  // Waits for the next stop, at most timeout_ns; DeadlineExceeded if none.
  absl::StatusOr<ThreadStop> WaitForStop(int64_t timeout_ns);
  absl::Status GetRegisters(struct user_regs_struct* regs);
  absl::Status SetRegisters(const struct user_regs_struct& regs);
  // Resumes until the next syscall entry or exit.
  absl::Status ResumeToSyscall();
  absl::Status Continue(int signal);
  // PTRACE_DETACH; `signal` is delivered when detaching from a signal stop.
  absl::Status Detach(int signal);

 private:
  TracedThread(pid_t pid, pid_t tid) : pid_(pid), tid_(tid) {}
  absl::Status Request(int request, const char* name, void* addr, void* data);

  pid_t pid_;
  pid_t tid_;
};

}  // namespace gpuos::inject
