// The ptrace transaction that makes one thread of a running process load a
// library and call its entry function.  It runs in the guardian process
// (injection_guardian.h), never in gpuos-trace itself.  Steps:
//   1. choose a thread blocked in a safe syscall (thread_choice.h);
//   2. PTRACE_SEIZE + PTRACE_INTERRUPT that thread only, save its registers;
//   3. make it run mmap(8 KiB, PROT_READ|PROT_EXEC) at a `syscall`
//      instruction of its C library (PTRACE_SYSCALL to the syscall's exit),
//      put its registers back, with a PTRACE_INTERRUPT pending so that
//      leaving that stop goes through the kernel's syscall-restart path;
//   4. write the stub and its data (injection_stub.h) through /proc/PID/mem;
//   5. set rip to the stub (the interrupted syscall's restart applied,
//      orig_rax = -1) and PTRACE_DETACH at once;
//   6. watch the stub's state word until the entry function returned, the
//      load failed, or the timeout.
// A signal that reaches the thread meanwhile, or a thread that has left its
// wait, rolls the attempt back (registers restored, signal re-delivered by
// the detach) and another attempt follows.
//
// What may hurt the target if this process dies (SIGKILL; the guardian
// blocks every other signal and tells the OOM killer to spare it): only the
// few tens of microseconds of step 3 between setting the mmap registers
// and putting the saved ones back.  Killed there, the kernel detaches the
// thread and it runs on from the C library's `syscall` instruction with the
// mmap arguments in its registers, which will most likely crash it.  At
// every other moment the thread is either untouched (its own registers, the
// kernel restarts its syscall) or fully set up to run the stub.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "inject/injection_stub.h"
#include "inject/target_loader.h"

namespace gpuos::inject {

struct InjectionPlan {
  pid_t pid = 0;
  std::string library_path_in_target;
  std::string entry_symbol;
  std::string argument;
  int64_t timeout_ns = 10'000'000'000;
  TargetLoader loader;
  CpuStateSave cpu_state;
  // GPUOS_INJECT_TEST_PAUSE: at this named safe point the guardian prints
  // "gpuos-inject: paused at <phase> guardian=<pid>" to stderr and sleeps
  // 3 s, so that tests can kill it there.  Phases: seized-and-stopped,
  // page-mapped-and-regs-restored, stub-written, detached-stub-running.
  // (GPUOS_INJECT_DEBUG=1: see injection_debug.h.)
  std::string pause_phase;
};

struct TransactionResult {
  pid_t hijacked_tid = 0;
  int64_t stopped_ns = 0;                // first ptrace stop .. PTRACE_DETACH
  int64_t until_entry_returned_ns = 0;   // PTRACE_DETACH .. state "returned"
};

absl::StatusOr<TransactionResult> RunInjectionTransaction(const InjectionPlan& plan);

}  // namespace gpuos::inject
