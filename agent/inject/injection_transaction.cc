// The guardian's ptrace transaction; see injection_transaction.h.
#include "inject/injection_transaction.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "inject/injection_debug.h"
#include "inject/ptrace_permission.h"
#include "inject/remote_process.h"
#include "inject/syscall_restart.h"
#include "inject/thread_choice.h"
#include "inject/traced_thread.h"

namespace gpuos::inject {
namespace {

constexpr int64_t kMs = 1000 * 1000;
// A thread in an interruptible wait stops within microseconds; one that does
// not is in uninterruptible sleep, and we give up on it.
constexpr int64_t kStopTimeout = 500 * kMs;
// Waits while the thread runs our mmap: it cannot be abandoned halfway, so
// these are generous (memory pressure can stall an mmap).
constexpr int64_t kMmapStopTimeout = 30'000 * kMs;
constexpr int kMaxAttempts = 8;
// Code segment selector of a 64-bit user thread (__USER_CS).
constexpr unsigned long long kUserCs64 = 0x33;

// An attempt that may be repeated (the thread moved on, a signal came):
// the thread has been let go untouched.
absl::Status Retry(const std::string& why) { return absl::AbortedError(why); }

void Trace(const char* what) { InjectionDebugLog(what); }

void PauseForTest(const InjectionPlan& plan, const char* phase) {
  if (plan.pause_phase != phase) return;
  std::string line =
      absl::StrFormat("gpuos-inject: paused at %s guardian=%d\n", phase, static_cast<int>(getpid()));
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  SleepNanos(3000 * kMs);
}

bool PageStillOurs(pid_t pid, uint64_t page) {
  auto mappings = ReadMappings(pid);
  if (!mappings.ok()) return false;
  const MemoryMapping* m = FindMapping(*mappings, page);
  return m != nullptr && m->start == page && m->end >= page + kStubMapSize && m->inode == 0 &&
         m->path.empty() && m->perms == "r-xp";
}

absl::string_view BaseName(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// By base name too: seen from outside a container, its files' paths differ.
bool LibraryMapped(pid_t pid, const std::string& path) {
  auto mappings = ReadMappings(pid);
  if (!mappings.ok()) return false;
  for (const MemoryMapping& m : *mappings) {
    if (m.path == path || BaseName(m.path) == BaseName(path)) return true;
  }
  return false;
}

// The thread's registers set to run mmap(kStubMapSize, PROT_READ|PROT_EXEC)
// at the C library's `syscall` instruction.
struct user_regs_struct MmapRegisters(const struct user_regs_struct& saved, uint64_t syscall_instruction) {
  struct user_regs_struct regs = saved;
  regs.rip = syscall_instruction;
  regs.rax = SYS_mmap;
  regs.rdi = 0;
  regs.rsi = kStubMapSize;
  regs.rdx = PROT_READ | PROT_EXEC;
  regs.r10 = MAP_PRIVATE | MAP_ANONYMOUS;
  regs.r8 = static_cast<unsigned long long>(-1);
  regs.r9 = 0;
  // Not a syscall exit any more: no restart of the saved syscall here.
  regs.orig_rax = static_cast<unsigned long long>(-1);
  return regs;
}

class Transaction {
 public:
  explicit Transaction(const InjectionPlan& plan) : plan_(plan) {
    choice_options_.runtime_ranges = plan.loader.runtime_ranges;
    if (getrandom(&cookie_, sizeof(cookie_), 0) != sizeof(cookie_)) {
      cookie_ = static_cast<uint64_t>(MonotonicNanos()) ^ (uint64_t{static_cast<uint32_t>(getpid())} << 32);
    }
  }

  absl::StatusOr<TransactionResult> Run();

 private:
  // One attempt on one thread; on success the thread runs the stub and we
  // are detached.  Aborted: let go untouched, try again.
  absl::StatusOr<int64_t> TryThread(pid_t tid);
  // Step 2: seizes the thread and waits until it stops.  Aborted: let go
  // untouched.
  absl::StatusOr<TracedThread> StopThread(pid_t tid);
  // Whether the stopped thread may be borrowed: 64-bit code, still in a
  // safe wait, no signal pending.  On an error it has been let go.
  absl::Status CheckBorrowable(TracedThread& thread, const struct user_regs_struct& saved);
  // Step 4: writes the stub, which returns to `resume`, into our page.  On
  // an error the thread has been let go.
  absl::Status WriteStub(TracedThread& thread, const struct user_regs_struct& resume);
  // Step 3; on success the thread is still stopped (at the mmap's exit)
  // with its own registers.  Aborted: it was let go (a signal came first).
  absl::StatusOr<uint64_t> MapStubPages(TracedThread& thread, const struct user_regs_struct& saved);
  // Puts the saved registers back and detaches, delivering `signal`.
  absl::Status LetGo(TracedThread& thread, const struct user_regs_struct& saved, int signal);
  absl::StatusOr<int64_t> WaitForEntry();

  const InjectionPlan& plan_;
  ThreadChoiceOptions choice_options_;
  uint64_t page_ = 0;  // mapped in an earlier attempt; reused
  uint64_t cookie_ = 0;
};

absl::Status Transaction::LetGo(TracedThread& thread, const struct user_regs_struct& saved,
                                int signal) {
  if (absl::Status s = thread.SetRegisters(saved); !s.ok()) return s;
  return thread.Detach(signal);
}

absl::StatusOr<uint64_t> Transaction::MapStubPages(TracedThread& thread,
                                                   const struct user_regs_struct& saved) {
  const struct user_regs_struct regs = MmapRegisters(saved, plan_.loader.syscall_instruction);
  // Best effort on the paths that cannot happen unless the thread is being
  // killed: leave it with its own registers.
  auto abandon = [&](absl::Status why) {
    LetGo(thread, saved, 0).IgnoreError();
    return why;
  };

  // ---- Dirty window: from this SETREGS until the saved registers are back.
  if (absl::Status s = thread.SetRegisters(regs); !s.ok()) return s;
  if (absl::Status s = thread.ResumeToSyscall(); !s.ok()) return abandon(s);
  Trace("mmap: resumed to the syscall entry");
  auto stop = thread.WaitForStop(kMmapStopTimeout);
  Trace("mmap: first stop");
  if (!stop.ok()) return stop.status();
  if (stop->kind == StopKind::kGone) {
    return absl::NotFoundError(absl::StrFormat("pid %d exited during the injection", plan_.pid));
  }
  if (stop->kind == StopKind::kSignalStop || stop->kind == StopKind::kGroupStop) {
    // Dequeued on the way out of the event stop, before the mmap ran: put
    // everything back and let the kernel deliver it as it would have.
    if (absl::Status s = LetGo(thread, saved, stop->kind == StopKind::kSignalStop ? stop->signal : 0);
        !s.ok()) {
      return s;
    }
    if (stop->kind == StopKind::kGroupStop) {
      return absl::FailedPreconditionError(
          absl::StrFormat("pid %d is being stopped (signal %d)", plan_.pid, stop->signal));
    }
    return Retry("a signal arrived before the mmap");
  }
  if (stop->kind != StopKind::kSyscallStop) {
    return abandon(absl::InternalError("unexpected stop before the mmap syscall"));
  }
  // Syscall entry; run it to its exit.
  if (absl::Status s = thread.ResumeToSyscall(); !s.ok()) return abandon(s);
  stop = thread.WaitForStop(kMmapStopTimeout);
  Trace("mmap: second stop");
  if (!stop.ok()) return stop.status();
  if (stop->kind == StopKind::kGone) {
    return absl::NotFoundError(absl::StrFormat("pid %d exited during the injection", plan_.pid));
  }
  if (stop->kind != StopKind::kSyscallStop) {
    return abandon(absl::InternalError("unexpected stop in the mmap syscall"));
  }
  struct user_regs_struct after;
  if (absl::Status s = thread.GetRegisters(&after); !s.ok()) return abandon(s);
  // The trap first: whoever resumes the thread from here (us, or the kernel
  // if we die), it then goes through the signal path, where the kernel
  // restarts the saved syscall from the saved registers.
  if (absl::Status s = thread.Interrupt(); !s.ok()) return abandon(s);
  if (absl::Status s = thread.SetRegisters(saved); !s.ok()) return s;
  // ---- End of the dirty window.

  // The thread stays in this syscall-exit stop: from here on, released by
  // a detach or by our death, it takes the kernel's signal path (the
  // interrupt above) with its own registers: the syscall it was in is
  // restarted as if we had never been there.
  const int64_t result = static_cast<int64_t>(after.rax);
  if (result < 0 && result >= -4095) {
    if (absl::Status s = thread.Detach(0); !s.ok()) return s;
    return absl::FailedPreconditionError(absl::StrFormat(
        "mmap of the injection stub's pages in pid %d failed: %s", plan_.pid, strerror(-result)));
  }
  page_ = static_cast<uint64_t>(result);
  return page_;
}

absl::StatusOr<TracedThread> Transaction::StopThread(pid_t tid) {
  const pid_t pid = plan_.pid;
  auto seized = TracedThread::Seize(pid, tid);
  if (!seized.ok()) {
    if (absl::IsPermissionDenied(seized.status())) {
      return absl::PermissionDeniedError(DescribePtraceDenied(pid, tid));
    }
    if (absl::IsNotFound(seized.status())) return Retry(std::string(seized.status().message()));
    return seized.status();
  }
  TracedThread& thread = *seized;
  Trace("seized");
  if (absl::Status s = thread.Interrupt(); !s.ok()) {
    // Only fails when the thread is gone; exiting undoes the seize anyway.
    return absl::IsNotFound(s) ? Retry(std::string(s.message())) : s;
  }
  auto stop = thread.WaitForStop(kStopTimeout);
  if (!stop.ok()) {
    // Still running (uninterruptible): it cannot be detached until it stops;
    // the guardian's exit releases it, with nothing changed.
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s (uninterruptible sleep?); it was let go unchanged", stop.status().message()));
  }
  switch (stop->kind) {
    case StopKind::kGone:
      return Retry(absl::StrFormat("thread %d exited", tid));
    case StopKind::kSignalStop:
      if (absl::Status s = thread.Detach(stop->signal); !s.ok()) return s;
      return Retry(absl::StrFormat("a signal (%d) reached thread %d first", stop->signal, tid));
    case StopKind::kGroupStop:
      if (absl::Status s = thread.Detach(0); !s.ok()) return s;
      return absl::FailedPreconditionError(
          absl::StrFormat("pid %d is being stopped (signal %d)", pid, stop->signal));
    case StopKind::kSyscallStop:
    case StopKind::kEventStop:
      break;
  }
  return thread;
}

absl::Status Transaction::CheckBorrowable(TracedThread& thread, const struct user_regs_struct& saved) {
  const pid_t pid = plan_.pid;
  const pid_t tid = thread.tid();
  if (saved.cs != kUserCs64) {
    if (absl::Status s = thread.Detach(0); !s.ok()) return s;
    return absl::FailedPreconditionError(
        absl::StrFormat("thread %d of pid %d runs 32-bit code; only 64-bit processes are supported",
                        tid, pid));
  }
  const int64_t nr = static_cast<int64_t>(saved.orig_rax);
  if (!SafeToBorrow(nr, saved.rdi, choice_options_)) {
    if (absl::Status s = thread.Detach(0); !s.ok()) return s;
    return Retry(absl::StrFormat("thread %d had left its wait (now %s)", tid,
                                 nr < 0 ? std::string("running") : SyscallLabel(nr)));
  }
  if (auto pending = DeliverableSignals(pid, tid); !pending || *pending != 0) {
    if (absl::Status s = thread.Detach(0); !s.ok()) return s;
    return Retry(absl::StrFormat("a signal is pending for thread %d", tid));
  }
  return absl::OkStatus();
}

absl::Status Transaction::WriteStub(TracedThread& thread, const struct user_regs_struct& resume) {
  StubParameters parameters;
  parameters.return_rip = resume.rip;
  parameters.dlopen = plan_.loader.dlopen;
  parameters.dlsym = plan_.loader.dlsym;
  parameters.dlerror = plan_.loader.dlerror;
  parameters.dlclose = plan_.loader.dlclose;
  parameters.library_path = plan_.library_path_in_target;
  parameters.entry_symbol = plan_.entry_symbol;
  parameters.argument = plan_.argument;
  parameters.cpu_state = plan_.cpu_state;
  parameters.cookie = cookie_;
  auto image = BuildStubImage(parameters);
  if (!image.ok()) {
    if (absl::Status s = thread.Detach(0); !s.ok()) return s;
    return image.status();
  }
  if (absl::Status s = WriteMemoryForced(plan_.pid, page_, image->data(), image->size()); !s.ok()) {
    if (absl::Status d = thread.Detach(0); !d.ok()) return d;
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Transaction::TryThread(pid_t tid) {
  const pid_t pid = plan_.pid;
  auto stopped = StopThread(tid);
  if (!stopped.ok()) return stopped.status();
  TracedThread& thread = *stopped;
  // Stopped from here: until then it sat in its wait as before.
  const int64_t stopped_since = MonotonicNanos();
  Trace("stopped");
  struct user_regs_struct saved;
  if (absl::Status s = thread.GetRegisters(&saved); !s.ok()) return s;
  if (absl::Status s = CheckBorrowable(thread, saved); !s.ok()) return s;
  Trace("checked");
  PauseForTest(plan_, "seized-and-stopped");

  if (page_ == 0 || !PageStillOurs(pid, page_)) {
    page_ = 0;
    auto page = MapStubPages(thread, saved);
    if (!page.ok()) return page.status();
    Trace("mapped");
    PauseForTest(plan_, "page-mapped-and-regs-restored");
  }

  struct user_regs_struct resume = ResumeRegisters(saved);
  if (absl::Status s = WriteStub(thread, resume); !s.ok()) return s;
  Trace("written");
  PauseForTest(plan_, "stub-written");

  // A signal handler run now would see the stub's registers; the kernel
  // would have interrupted the syscall for it instead.  Let it have that.
  if (auto pending = DeliverableSignals(pid, tid); !pending || *pending != 0) {
    if (absl::Status s = thread.Detach(0); !s.ok()) return s;
    return Retry(absl::StrFormat("a signal is pending for thread %d", tid));
  }
  struct user_regs_struct into_stub = resume;
  into_stub.rip = page_;
  if (absl::Status s = thread.SetRegisters(into_stub); !s.ok()) {
    if (absl::Status d = LetGo(thread, saved, 0); !d.ok()) return d;
    return s;
  }
  // From here the thread needs nobody: if we die now, it runs the stub.
  if (absl::Status s = thread.Detach(0); !s.ok()) return s;
  Trace("detached");
  return MonotonicNanos() - stopped_since;
}

absl::StatusOr<int64_t> Transaction::WaitForEntry() {
  const pid_t pid = plan_.pid;
  const int64_t start = MonotonicNanos();
  const int64_t deadline = start + plan_.timeout_ns;
  StubState last = StubState::kNotStarted;
  Trace("waiting for the entry");
  for (;;) {
    auto progress = ReadStubProgress(pid, page_, cookie_);
    const int64_t now = MonotonicNanos();
    if (!progress.ok()) {
      // The entry function unmaps the pages once the thread has left them.
      if (LibraryMapped(pid, plan_.library_path_in_target)) return now - start;
      if (ListThreads(pid).empty()) {
        return absl::NotFoundError(
            absl::StrFormat("pid %d exited before the library's entry function returned", pid));
      }
      return absl::InternalError(absl::StrFormat(
          "the injection stub's pages in pid %d vanished before it reported: %s", pid,
          progress.status().message()));
    }
    last = progress->state;
    if (last == StubState::kEntryReturned) return now - start;
    if (last == StubState::kLoadFailed) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "loading %s into pid %d failed: %s", plan_.library_path_in_target, pid,
          progress->error.empty() ? "dlopen/dlsym failed without a message" : progress->error));
    }
    if (now >= deadline) break;
    SleepNanos(now - start < 20 * kMs ? 200 * 1000 : kMs);
  }
  if (last == StubState::kNotStarted) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "the injection stub in pid %d never reported within %.1f s (could it not make its data "
        "page writable? a seccomp filter?)",
        pid, plan_.timeout_ns / 1e9));
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "dlopen of %s or its entry function %s in pid %d had not returned after %.1f s; the thread "
      "stays in the stub until it does",
      plan_.library_path_in_target, plan_.entry_symbol, pid, plan_.timeout_ns / 1e9));
}

absl::StatusOr<TransactionResult> Transaction::Run() {
  const int64_t give_up = MonotonicNanos() + 3000 * kMs;
  std::string last_retry;
  // The thread tried least often goes first (the best of those, in
  // ChooseThreads' order): a launch-bound job's main thread is seen in a
  // wait often but has left it by the time it stops, try after try, while
  // a helper waits for long.
  std::map<pid_t, int> tries;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    choice_options_.patience_ns =
        attempt == 0 ? 1000 * kMs : std::max<int64_t>(0, give_up - MonotonicNanos());
    auto threads = ChooseThreads(plan_.pid, choice_options_);
    if (!threads.ok()) {
      if (last_retry.empty()) return threads.status();
      return absl::Status(threads.status().code(),
                          absl::StrCat(threads.status().message(), "; last try: ", last_retry));
    }
    pid_t tid = threads->front().tid;
    for (const ThreadChoice& choice : *threads) {
      if (tries[choice.tid] < tries[tid]) tid = choice.tid;
    }
    ++tries[tid];
    Trace("chose a thread");
    auto stopped = TryThread(tid);
    if (stopped.ok()) {
      TransactionResult result;
      result.hijacked_tid = tid;
      result.stopped_ns = *stopped;
      PauseForTest(plan_, "detached-stub-running");
      auto waited = WaitForEntry();
      if (!waited.ok()) return waited.status();
      result.until_entry_returned_ns = *waited;
      return result;
    }
    if (!absl::IsAborted(stopped.status())) return stopped.status();
    last_retry = std::string(stopped.status().message());
    Trace(last_retry.c_str());
    if (MonotonicNanos() >= give_up) break;
    SleepNanos(5 * kMs);
  }
  return absl::UnavailableError(absl::StrFormat(
      "could not inject into pid %d after repeated tries (last: %s)", plan_.pid, last_retry));
}

}  // namespace

absl::StatusOr<TransactionResult> RunInjectionTransaction(const InjectionPlan& plan) {
  Transaction transaction(plan);
  return transaction.Run();
}

}  // namespace gpuos::inject
