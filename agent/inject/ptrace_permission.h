// Why the kernel refuses to let us ptrace a process, in words a user can act
// on: already traced by someone else (TracerPid), Yama's ptrace_scope, no
// CAP_SYS_PTRACE for another user's process, or (with the capability) a
// security module.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpuos::inject {

// One sentence, for an attach of `pid` (thread `tid`) that failed with EPERM.
std::string DescribePtraceDenied(pid_t pid, pid_t tid);

// "pid 123 (gdb)" for the tracer of `tid`, or "" when it is not traced.
std::string TracerOf(pid_t pid, pid_t tid);

}  // namespace gpuos::inject
