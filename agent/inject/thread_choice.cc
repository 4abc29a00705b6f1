// Choosing the thread to borrow for an injection; see thread_choice.h.
#include "inject/thread_choice.h"

#include <sys/syscall.h>

#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "inject/remote_process.h"
#include "inject/target_loader.h"

namespace gpuos::inject {
namespace {

struct SyscallInfo {
  int64_t nr;
  const char* name;
  bool safe;
};

// The syscalls worth naming in a refusal; those marked safe are blocking
// waits that malloc and the loader never make while holding their locks.
constexpr SyscallInfo kSyscalls[] = {
    {SYS_futex, "futex", true},
    {SYS_futex_waitv, "futex_waitv", true},
    {SYS_poll, "poll", true},
    {SYS_ppoll, "ppoll", true},
    {SYS_epoll_wait, "epoll_wait", true},
    {SYS_epoll_pwait, "epoll_pwait", true},
    {SYS_epoll_pwait2, "epoll_pwait2", true},
    {SYS_select, "select", true},
    {SYS_pselect6, "pselect6", true},
    {SYS_nanosleep, "nanosleep", true},
    {SYS_clock_nanosleep, "clock_nanosleep", true},
    {SYS_wait4, "wait4", true},
    {SYS_waitid, "waitid", true},
    {SYS_pause, "pause", true},
    {SYS_rt_sigsuspend, "rt_sigsuspend", true},
    {SYS_rt_sigtimedwait, "rt_sigtimedwait", true},
    {SYS_accept, "accept", true},
    {SYS_accept4, "accept4", true},
    {SYS_recvfrom, "recvfrom", true},
    {SYS_recvmsg, "recvmsg", true},
    {SYS_mmap, "mmap", false},
    {SYS_munmap, "munmap", false},
    {SYS_mprotect, "mprotect", false},
    {SYS_mremap, "mremap", false},
    {SYS_brk, "brk", false},
    {SYS_madvise, "madvise", false},
    {SYS_openat, "openat", false},
    {SYS_open, "open", false},
    {SYS_read, "read", false},
    {SYS_write, "write", false},
    {SYS_ioctl, "ioctl", false},
    {SYS_clone, "clone", false},
    {SYS_clone3, "clone3", false},
    {SYS_vfork, "vfork", false},
};

const SyscallInfo* Lookup(int64_t nr) {
  for (const SyscallInfo& info : kSyscalls) {
    if (info.nr == nr) return &info;
  }
  return nullptr;
}

}  // namespace

bool IsSafeBlockingSyscall(int64_t nr) {
  const SyscallInfo* info = Lookup(nr);
  return info != nullptr && info->safe;
}

std::string SyscallLabel(int64_t nr) {
  const SyscallInfo* info = Lookup(nr);
  return info != nullptr ? info->name : absl::StrFormat("syscall %d", nr);
}

bool SafeToBorrow(int64_t nr, uint64_t arg0, const ThreadChoiceOptions& options) {
  if (!IsSafeBlockingSyscall(nr)) return false;
  // A futex word of the C runtime itself (a malloc arena, the loader lock,
  // a stdio lock): the thread is inside the runtime's locking.
  if ((nr == SYS_futex) && InRanges(options.runtime_ranges, arg0)) return false;
  return true;
}

namespace {

// Why a thread may not be borrowed now ("running", "in read", ...); empty
// when it may, with the syscall it waits in set in `choice`.
std::string WhyNotBorrowable(pid_t pid, const absl::StatusOr<std::vector<MemoryMapping>>& mappings,
                             const ThreadChoiceOptions& options, ThreadChoice* choice) {
  const pid_t tid = choice->tid;
  const char state = ThreadState(pid, tid);
  if (state != 'S') {
    return state == 0 ? "gone" : state == 'R' ? "running" : absl::StrFormat("state %c", state);
  }
  auto tracer = StatusField(pid, tid, "TracerPid");
  if (tracer && *tracer != "0") return absl::StrFormat("traced by pid %s", *tracer);
  auto sys = ReadThreadSyscall(pid, tid);
  if (!sys.ok()) return std::string(sys.status().message());
  if (sys->kind == ThreadSyscallState::Kind::kRunning) return "running";
  if (sys->kind == ThreadSyscallState::Kind::kBlockedOutsideSyscall) return "blocked outside a syscall";
  if (!IsSafeBlockingSyscall(sys->nr)) return absl::StrFormat("in %s", SyscallLabel(sys->nr));
  if (!SafeToBorrow(sys->nr, sys->args[0], options)) return "waiting on a C library lock";
  if (mappings.ok()) {
    const MemoryMapping* stack = FindMapping(*mappings, sys->sp);
    // The main thread's [stack] grows on demand; other stacks do not.
    if (stack == nullptr ||
        (stack->path != "[stack]" && sys->sp - stack->start < options.min_stack_headroom)) {
      return "too little stack left";
    }
  }
  choice->syscall_nr = sys->nr;
  return "";
}

}  // namespace

absl::StatusOr<std::vector<ThreadChoice>> ChooseThreads(pid_t pid,
                                                        const ThreadChoiceOptions& options) {
  const int64_t deadline = MonotonicNanos() + options.patience_ns;
  constexpr int64_t kMainThreadGrace = 50 * 1000 * 1000;
  int64_t others_since = 0;
  std::map<pid_t, std::string> last_reason;
  for (;;) {
    std::vector<pid_t> tids = ListThreads(pid);
    if (tids.empty()) {
      return absl::NotFoundError(absl::StrFormat("pid %d exited", pid));
    }
    auto mappings = ReadMappings(pid);
    std::vector<ThreadChoice> main_thread;
    std::vector<ThreadChoice> others;
    last_reason.clear();
    for (pid_t tid : tids) {
      ThreadChoice choice{tid, -1};
      std::string why_not = WhyNotBorrowable(pid, mappings, options, &choice);
      if (!why_not.empty()) {
        last_reason[tid] = std::move(why_not);
        continue;
      }
      (tid == pid ? main_thread : others).push_back(choice);
    }
    const int64_t now = MonotonicNanos();
    // A live main thread may only be between two waits: give it a moment.
    const char main_state = ThreadState(pid, pid);
    if (main_thread.empty() && !others.empty() && (main_state == 'R' || main_state == 'S')) {
      if (others_since == 0) others_since = now;
      if (now - others_since < kMainThreadGrace && now < deadline) {
        SleepNanos(2 * 1000 * 1000);
        continue;
      }
    }
    if (!main_thread.empty() || !others.empty()) {
      main_thread.insert(main_thread.end(), others.begin(), others.end());
      return main_thread;
    }
    if (now >= deadline) break;
    SleepNanos(10 * 1000 * 1000);
  }
  std::vector<std::string> reasons;
  for (const auto& [tid, reason] : last_reason) {
    if (reasons.size() == 8) {
      reasons.push_back(absl::StrFormat("%d more", last_reason.size() - 8));
      break;
    }
    reasons.push_back(absl::StrFormat("%d %s", tid, reason));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "no thread of pid %d was blocked in a syscall where it is safe to load a library for %.1f "
      "s (%s)",
      pid, options.patience_ns / 1e9, absl::StrJoin(reasons, ", ")));
}

}  // namespace gpuos::inject
