// The registers a thread stopped by ptrace on its way out of an interrupted
// syscall resumes with, as the kernel itself computes them when no signal
// handler runs (arch/x86/kernel/signal.c, arch_do_signal_or_restart):
// -ERESTARTSYS, -ERESTARTNOINTR and -ERESTARTNOHAND re-issue the same
// syscall, -ERESTART_RESTARTBLOCK issues restart_syscall, both by stepping
// rip back over the 2-byte `syscall` instruction.  The injection stub jumps
// to the result, and orig_rax = -1 keeps the kernel from applying the
// restart a second time, to the stub's address.
#pragma once

#include <sys/user.h>

namespace gpuos::inject {

// x86_64 only; `stopped` as PTRACE_GETREGS returned it.
struct user_regs_struct ResumeRegisters(const struct user_regs_struct& stopped);

}  // namespace gpuos::inject
