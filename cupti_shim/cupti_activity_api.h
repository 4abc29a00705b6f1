// CUPTI's activity API as the shim uses it (Kineto's CuptiActivityApi):
//  - buffers: CUPTI's buffer callbacks take a buffer from a capped pool
//    (cupti_buffer_pool.h) or queue a full one for the parser
//    (cupti_parser.h) under a short lock, and never call CUPTI;
//  - kinds: which activity kinds are enabled (GPUOS_CUPTI_KINDS narrows
//    them), how API calls are recorded, and switching the device kinds off
//    and on at capture window edges (SetDeviceActivityEnabled,
//    cupti_injection.h);
//  - flushing: at window ends, context teardown, stops and exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cupti_collection_state.h"

namespace gpuos_shim {

// Registers the buffer callbacks with CUPTI.
CUptiResult RegisterBufferCallbacks(const CuptiApi& api);

// Before any kind is enabled, so before CUPTI asks for a buffer: buffers
// handed over already zero (cupti_buffer_pool.h), unless
// GPUOS_CUPTI_ZEROED_BUFFERS=0 (for measuring what it saves).
void ConfigureActivityBuffers(const CuptiApi& api);

// A buffer the parser has read, back to the pool.
void ReturnBuffer(uint8_t* buffer);
// Our buffers' memory goes back once CUPTI has returned them all.
void FreePooledBuffers();

// Whether GPUOS_CUPTI_KINDS (gpuos-trace --cuda-records) asks for `kind`
// (kernel, memcpy, memset, sync, runtime, driver); all when it is unset.
bool KindWanted(const char* kind);
// ", only kernel,memcpy records (...)" when the kinds are narrowed, so a
// trace without API calls says why; else "".
std::string KindsNote();

struct EnabledKinds {
  bool kernels = false;
  bool copies = false;
  bool serialised_kernels = false;  // KERNEL, CONCURRENT_KERNEL refused
  std::string api_records;          // how API calls are recorded, for the status
};
// Enables the wanted kinds and API records, and remembers the device kinds
// for capture windows (all on now).  `cuda_running`: CUDA was initialized
// before this start, so CUPTI's per-call API switches would record nothing.
EnabledKinds EnableActivityKinds(const CuptiApi& api, bool cuda_running);

// Disables every kind the shim may have enabled, per-call API switches too.
void DisableAllKinds(const CuptiApi& api);

// Asks CUPTI for what it has and has the parser flush the channel once it
// has turned that into events.  Does not wait: it runs on the job's thread,
// inside CUDA calls.
void RequestFlushFromCallback();

// Makes CUPTI hand over every buffer, waits up to `timeout` for the parser
// to turn them into events, drains the API rings and flushes the channel.
// Returns whether the parser took everything in time.
bool FlushAndDrain(std::chrono::milliseconds timeout);

}  // namespace gpuos_shim
