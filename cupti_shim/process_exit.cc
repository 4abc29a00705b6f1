// _exit() and _Exit() as the traced process calls them: what the shim has
// queued is sent first.  exit() runs the atexit handlers that flush the
// event channel and CUPTI's buffers; _exit() skips them, and Python's
// multiprocessing ends every forked child with os._exit() (hogwild workers,
// pools of trials), as do scripts that skip a slow teardown.  Without this
// the last flush interval of a process (up to 100 ms of events: its last
// training steps) was lost.
//
// _exit() is async-signal-safe and is called from signal handlers (a
// DataLoader worker's SIGTERM handler), where the interrupted code may hold
// any lock: so the exiting thread only asks the channel's sender thread to
// flush and waits a bounded time (event_channel.h: RequestFlushAndWait), and
// CUPTI's buffers, whose flush can block, are left to the atexit path.
//
// Defined in the preloaded shim, these come before libc's for every caller
// that links them dynamically (an attached process, whose shim is loaded
// late, keeps libc's).  A vfork child (subprocess's failed exec) shares its
// parent's memory and must touch none of it: the flush runs only in the
// process whose events the channel holds.  Built into the shared library
// only, never the testable archive, so tests keep libc's.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "event_channel.h"

namespace {

constexpr int kExitFlushTimeoutMs = 200;

[[noreturn]] void FlushAndExit(int status) {
  if (gpuos_shim::ChannelUsedByThisProcess()) gpuos_shim::RequestFlushAndWait(kExitFlushTimeoutMs);
  for (;;) syscall(SYS_exit_group, status);
}

}  // namespace

extern "C" {
__attribute__((visibility("default"), noreturn)) void _exit(int status) { FlushAndExit(status); }
__attribute__((visibility("default"), noreturn)) void _Exit(int status) { FlushAndExit(status); }
}
