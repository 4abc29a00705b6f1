// The shim's way out: encoded events go into a bounded in-process queue; a
// background thread sends them to the agent as EventBatch messages over the
// Unix socket named by GPUOS_SHIM_SOCKET.  Nothing here ever blocks an
// application thread for long or ends its process: when the queue is full
// or the agent is gone, events are dropped and counted.  Flushed
// periodically, at exit, and on request (cudaDeviceReset).  Survives fork:
// the child starts with an empty queue and its own connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace gpuos_shim {

// Queues one encoded gpuos.v1.Event (wire_encoder.h).  Thread-safe.
void SubmitEvent(std::string encoded_event);

// Sends everything queued now, from the calling thread (bounded wait).
void FlushEvents();

// What ShimStats reports for this process.
void SetCuptiStatus(bool active, const std::string& status);
void SetNvtxActive();
void AddCuptiDroppedRecords(uint64_t count);

// Whether this process has an agent to talk to (GPUOS_SHIM_SOCKET set).
bool ChannelConfigured();

// Thread id of the caller (gettid), cached per thread.
uint32_t CurrentTid();
// CLOCK_MONOTONIC now, in ns: the clock of every event.
uint64_t MonotonicNs();

}  // namespace gpuos_shim
