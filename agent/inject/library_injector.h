// Making a running process load a shared library and call one function of
// it, through ptrace (issue #6: injecting the CUDA shim into a job that was
// started without gpuos-trace).  x86_64 Linux only; elsewhere every call
// returns Unimplemented.
//
// One thread of the target, blocked in a harmless wait (futex, poll,
// nanosleep, ...), is borrowed for a moment: it is stopped (only it; the
// other threads keep running), given two fresh pages holding a small stub,
// and let go at once.  The stub calls dlopen(library_path, RTLD_NOW),
// dlsym(entry_symbol) and
//   extern "C" void entry(const char* argument, uintptr_t stub_page,
//                         size_t stub_size, int stub_tid);
// then puts every register (general, flags, vector) back and resumes the
// thread's interrupted syscall exactly as the kernel would have.  The entry
// must return quickly and unmap [stub_page, stub_page + stub_size) once
// thread stub_tid has left it (it is blocked in a syscall with its pc
// outside those pages, per /proc/self/task/<tid>/syscall, or has exited).
//
// The ptrace work runs in a separate guardian process (injection_guardian.h)
// that finishes or rolls back even if gpuos-trace is killed.  An error
// means the process was left as it was (at most, 8 KiB of unused pages
// stay mapped in it); the caller can fall back to another method.  The one
// moment at which SIGKILLing the guardian itself would hurt the target is
// the ~100 us while the borrowed thread runs mmap with our registers
// (injection_transaction.h).  The library's constructors and its entry run
// on the borrowed thread, which may hold locks of the application or of
// other libraries: they should only start a thread of their own.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gpuos {

struct InjectionRequest {
  pid_t pid = 0;
  std::string library_path;  // absolute, as gpuos-trace sees it
  std::string entry_symbol;
  std::string entry_argument;
  absl::Duration timeout = absl::Seconds(10);  // for dlopen + entry to return
};

struct InjectionReport {
  pid_t hijacked_tid = 0;
  // ptrace-stop time of the target thread: from its first stop to its
  // release (three trips through the scheduler: on a busy machine each
  // waits for a CPU).
  absl::Duration stopped;
  absl::Duration until_entry_returned;  // from its release to the entry's return
  // The path dlopen got: library_path, or a copy in the target's /tmp when
  // library_path is not visible in the target's mount namespace.
  std::string library_path_in_target;
};

// Errors (one line each): no such process; a kernel thread; gpuos-trace
// itself; a stopped or already traced process (TracerPid); not permitted
// (Yama ptrace_scope, no CAP_SYS_PTRACE: says which); library unreadable or
// not x86_64; no C library / dlopen in the target; no thread in a safe wait
// within ~1 s; dlopen or dlsym failed (dlerror's text); timeout.
absl::StatusOr<InjectionReport> InjectLibrary(const InjectionRequest& request);

}  // namespace gpuos
