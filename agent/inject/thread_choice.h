// Which thread of a process may be borrowed to run dlopen: one blocked in a
// syscall where it cannot be holding malloc's or the loader's locks
// (futex, poll, epoll_wait, nanosleep, ...), never one inside mmap, brk,
// openat and the like, which malloc and dlopen call with their locks taken.
// The main thread first, as it is the one most often idle in such a wait.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuos::inject {

// Blocking syscalls a thread can safely be taken out of (x86_64 numbers).
bool IsSafeBlockingSyscall(int64_t nr);
// "futex", "mmap", ... or "syscall 123".
std::string SyscallLabel(int64_t nr);

struct ThreadChoice {
  pid_t tid = 0;
  int64_t syscall_nr = -1;
};

struct ThreadChoiceOptions {
  // Address ranges of the C runtime's own data (TargetLoader::runtime_ranges).
  std::vector<std::pair<uint64_t, uint64_t>> runtime_ranges;
  // Stack the borrowed thread must have left below its stack pointer: dlopen,
  // constructors and the entry function run on it.
  uint64_t min_stack_headroom = 128 * 1024;
  // How long to keep looking while every thread is busy.
  int64_t patience_ns = 1000000000;
};

// The threads of `pid` that are safe to borrow now, best first; an error
// that says what each thread was doing when none is, after polling for
// `patience_ns`.
absl::StatusOr<std::vector<ThreadChoice>> ChooseThreads(pid_t pid,
                                                        const ThreadChoiceOptions& options);

// Whether a thread stopped in syscall `nr` with first argument `arg0` may be
// borrowed (the guardian re-checks what ChooseThreads saw, from the
// registers, once the thread is stopped).
bool SafeToBorrow(int64_t nr, uint64_t arg0, const ThreadChoiceOptions& options);

}  // namespace gpuos::inject
