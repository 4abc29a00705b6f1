// The shim's way out: encoded events go into a bounded in-process queue; a
// background thread sends them to the agent as EventBatch messages over a
// Unix socket.  Nothing here ever blocks an application thread for long or
// ends its process: when the queue is full or the agent is gone, events are
// dropped and counted.  Flushed periodically, at exit, and on request
// (cudaDeviceReset, detach).
//
// Where the agent is:
//  - launch mode: GPUOS_SHIM_SOCKET, read once when the shim loads; the
//    channel stays open for the life of the process, and a fork child keeps
//    it (with an empty queue and its own connection);
//  - attach mode (shim_control_server.h): OpenChannel() at "attach",
//    CloseChannel() at "detach"; a fork child starts closed.
// While the channel is closed every event is discarded at the door, and the
// sender thread is gone.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace gpuos_shim {

class ProtoWriter;

// Queues (copies) one encoded gpuos.v1.Event (wire_encoder.h).  Thread-safe.
void SubmitEvent(std::string_view encoded_event);

// Queues an event whose encoding is left to the sender thread: `parts`,
// copied end to end, are a raw record that `encode` turns into an encoded
// Event there (clearing `event` first).  For events made on the
// application's hot paths (NVTX ranges of every training step): what the
// thread pays is then a copy, not the encoder's code and buffers.
using DeferredEncoder = void (*)(std::string_view record, ProtoWriter* event);
void SubmitDeferred(DeferredEncoder encode, std::initializer_list<std::string_view> parts);

// Sends everything queued now, from the calling thread (bounded wait).
void FlushEvents();

// Whether this process (not a fork or vfork child that shares or copied
// the memory of the process that did) has submitted events: what an exit
// may flush.
bool ChannelUsedByThisProcess();

// Asks the sender thread to send what is queued now and waits up to
// `timeout_ms` for it: true when it did.  Async-signal-safe on the calling
// thread (atomics, futex, nanosleep: no lock, no allocation), so _exit()
// may call it from a signal handler; the sender thread does the work, and
// a sender blocked meanwhile (on a lock the caller holds) only costs the
// wait.
bool RequestFlushAndWait(int timeout_ms);

// What ShimStats reports for this process.
void SetCuptiStatus(bool active, const std::string& status);
void SetNvtxActive();
bool NvtxActive();
void AddCuptiDroppedRecords(uint64_t count);
// Events lost before they reached the queue, to a full bounded buffer of
// the shim's own (the per-thread API call rings); counted with the queue's.
void AddShimDroppedEvents(uint64_t count);
// Put in front of cupti_status while attached (says the mode; "" in launch
// mode, whose status reads as it always did).
void SetStatusPrefix(const std::string& prefix);

// Whether this process has an agent to send to now (launch mode, or
// attached).  One atomic load: NVTX handlers ask on every call.
bool ChannelConfigured();
// Whether GPUOS_SHIM_SOCKET named an agent when the shim loaded.
bool LaunchMode();

// Attach: sends to the agent's SOCK_SEQPACKET socket at `agent_socket_path`
// from now on.  Connects at once, so a wrong path is an error here (one
// line in *error), not silence later.  Counters start again from zero.
// Fails in launch mode and when already open.
bool OpenChannel(const std::string& agent_socket_path, std::string* error);

// Detach: closes the door to new events, sends what is queued and a last
// ShimStats, and disconnects.  Returns the number of events sent since
// OpenChannel (the ShimStats messages included).  A no-op returning 0 when
// not attached.
uint64_t CloseChannel();

// Thread id of the caller (gettid), cached per thread.
uint32_t CurrentTid();
// This process's id, cached (a fork child reads its own): getpid() is a
// system call in glibc, and every event carries the pid.
uint32_t CurrentPid();
// CLOCK_MONOTONIC now, in ns: the clock of every event.
uint64_t MonotonicNs();

}  // namespace gpuos_shim
