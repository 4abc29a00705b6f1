// The shim's one CUPTI callback (OnCuptiCallback, given to cuptiSubscribe)
// and what it serves:
//  - API calls timed by our own entry/exit callbacks
//    (GPUOS_CUPTI_API_TIMING=callback) into per-thread rings
//    (cupti_api_call_rings.h) that the parser drains;
//  - a flush when a context is torn down or the device reset;
//  - counting streams being captured into CUDA graphs;
//  - the cuptiFinalize handshake of a stop (cupti_finalize.h).
// Also the per-domain API tables (names, which calls are traced).  The
// callback never takes a lock of ours but the ring's and the queue's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cupti_collection_state.h"

namespace gpuos_shim {

void CUPTIAPI OnCuptiCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void* data);

// Whether API call `cbid` of the runtime (driver: false) or driver domain
// is one the shim records.
bool IsTracedApi(const State& s, bool driver, uint32_t cbid);

// Names and traced allow-lists of both API domains, once per process (the
// first start; before the parser starts).
void BuildApiTablesOnce(const CuptiApi& api);

// Our callbacks for context teardown and cudaDeviceReset, where the shim
// flushes what CUPTI holds before it goes.
void EnableTeardownCallbacks(const CuptiApi& api);

// Our callbacks for beginning and ending a stream's capture into a CUDA
// graph and for launching one (a few calls a step at most), so that CUPTI
// is not taken out of the process while a capture is under way, nor ever
// once a graph has run (State's counts and graphs_launched).
void EnableGraphCallbacks(const CuptiApi& api);
// The calls whose rhythm counts steps for capture windows in a job with no
// step marks (capture_control.h): on while a spec that counts steps that way
// is in force (CaptureCountsCallRhythm), a few calls a step.
void SwitchStepCallCallbacks(const CuptiApi& api, bool on);

// Turns on our entry/exit callbacks for every traced call id of the wanted
// domains.  All or nothing: on a failure the ones turned on are turned off
// again, and the caller falls back to activity records.
// Those turned on are remembered for capture windows to switch
// (SwitchGatedApiCallbacksLocked), but for the ones that must stay on
// (cudaDeviceReset, a graph capture's begin and end); none are with
// GPUOS_CAPTURE_API_CALLBACKS=always.
bool EnableApiCallbacks(const CuptiApi& api, bool want_runtime, bool want_driver);

// Capture windows: switches the callbacks EnableApiCallbacks remembered
// off outside windows and on again at a window's start, so that CUPTI has
// no callback of ours on the launch path between windows.  Called with
// device_mu held, with the device kinds' switch (SetDeviceActivityEnabled):
// CUPTI asks a subscriber to serialize its cuptiEnableCallback calls, and
// none of CUPTI's callbacks into the shim takes device_mu.
void SwitchGatedApiCallbacksLocked(bool on);

}  // namespace gpuos_shim
