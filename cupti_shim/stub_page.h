// When the injector's code page may go: gpuos-trace's ptrace injector
// (agent/attach/) runs a small stub in a page it maps into the process; the
// stub loads the shim and calls gpuos_shim_attach_entry() with that page.
// The shim unmaps it once the stub's thread is out of it for good: blocked
// in a system call with its pc elsewhere (/proc/self/task/<tid>/syscall),
// or gone.  A thread running in user space cannot be located from inside
// the process, so "running" means "ask again later".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpuos_shim {

enum class StubThreadPlace {
  kOutside,  // in a system call, pc outside the page: unmap
  kInside,   // pc inside the page (in a system call or stopped there): keep
  kUnknown,  // running, or blocked outside a system call: ask again
  kGone,     // the thread has exited: unmap
};

// Reads the text of /proc/<pid>/task/<tid>/syscall:
//   "<nr> <6 args> <sp> <pc>"  blocked in system call <nr>
//   "-1 <sp> <pc>"             blocked, not in a system call
//   "running"
StubThreadPlace ClassifyStubThread(std::string_view syscall_text, uintptr_t page, size_t size);

// Where thread `tid` of this process is now, by the rule above.
StubThreadPlace LocateStubThread(int tid, uintptr_t page, size_t size);

}  // namespace gpuos_shim
