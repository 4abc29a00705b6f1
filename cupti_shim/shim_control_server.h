// Switching the shim on and off while its process runs (gpuos-trace
// --pid, issue #6).  The shim listens on the abstract Unix socket
// "\0gpuos-shim.<pid>" (SOCK_SEQPACKET) and takes the requests of
// control_protocol.h: "attach <agent socket>" opens the event channel to
// the agent (event_channel.h), starts CUPTI collection (cupti_injection.h)
// and lets NVTX handlers record; "detach", or the agent closing the
// connection, flushes CUPTI and the channel and switches everything off.
// Attach and detach may repeat any number of times.
//
// The listener comes up
//  - in the constructor, in a process started by `gpuos-trace --prepare`
//    (GPUOS_SHIM_PREPARED=1 and no GPUOS_SHIM_SOCKET): the shim is preloaded
//    and named by CUDA_INJECTION64_PATH/NVTX_INJECTION64_PATH, but idle;
//  - in gpuos_shim_attach_entry(), which gpuos-trace's ptrace injector calls
//    after loading the shim into a running process;
//  - in a fork child of a process whose listener ran, lazily: the child's
//    next call into the shim (an NVTX call, cuInit, the Python hook, the
//    entry) binds "gpuos-shim.<child pid>".  Starting a thread inside the
//    fork handler itself is not async-signal-safe, and a child that only
//    execs needs no listener (its new image, if prepared, gets one from the
//    constructor).  A child starts detached whatever its parent was.
//
// Only peers with uid 0 or the process's own uid are served (SO_PEERCRED);
// others are disconnected at once.  One agent at a time.  The listener's
// thread sleeps in poll() and wakes only for a connection, a request, or,
// for up to 30 s after an injection, to see whether the injector's stub
// page can be unmapped (stub_page.h).
#pragma once

#include <cstddef>
#include <cstdint>

// The injector's entry point.  `argument` is opaque text from the agent
// (unused today).  `stub_page`/`stub_size`: the injector's code page in
// this process, unmapped by the shim once thread `stub_tid` has left it;
// left mapped if that has not happened within 30 s.  Returns at once: it
// binds the control socket (so the agent may connect as soon as it
// returns) and starts the listener's thread; no blocking I/O.
extern "C" __attribute__((visibility("default"))) void gpuos_shim_attach_entry(
    const char* argument, uintptr_t stub_page, size_t stub_size, int stub_tid);

namespace gpuos_shim {

// Whether an agent may attach to this process now or later: prepared
// (GPUOS_SHIM_PREPARED=1 at load), or a listener was started here.
bool AttachPossible();

// In a fork child of a process whose listener ran: brings the child's own
// listener up, once.  One relaxed atomic load otherwise.
void RestartListenerIfForked();

// Whether environment variable `name` names this very shim library (same
// file), e.g. CUDA_INJECTION64_PATH: then CUDA will call us at cuInit.
bool EnvNamesThisShim(const char* name);

}  // namespace gpuos_shim
