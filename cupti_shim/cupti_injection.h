// CUDA activity collection inside a traced process, through CUPTI's
// activity API.  The CUDA driver calls InitializeInjection() at cuInit when
// CUDA_INJECTION64_PATH names the shim; from then on CUPTI fills buffers
// from a capped pool, hands each full one back to a callback that only
// queues it, and a parser thread of ours turns the records into events
// (cupti_record_encoder.h) for the event channel (event_channel.h).
//
// Collection can also start and stop while the process runs, for attach
// (shim_control_server.h): in a process whose CUDA is already up, a start
// subscribes, registers the timestamp and buffer callbacks and enables the
// same kinds and API filtering as a launched trace; a stop disables every
// kind, flushes every buffer through the parser and the event channel, and
// detaches CUPTI with cuptiFinalize (called, as CUPTI's documentation asks,
// from the exit callsite of a CUDA API call: the shim makes one itself).
// A later attach starts again.  In a prepared process (`gpuos-trace
// --prepare`) InitializeInjection only notes that CUDA is up; collection
// starts there at cuInit only if an agent attached before CUDA started.
// Injected into a process that loaded CUDA but has not initialized it,
// collection starts at once: CUPTI then records from cuInit on, and does
// not initialize CUDA itself (both seen on an H200).  Started mid-run,
// API records come from the whole RUNTIME/DRIVER kinds, filtered by the
// parser: CUPTI's per-call switches record nothing when set after cuInit.
//
// The traced job always comes first: when CUPTI is missing, too old, or
// already taken by another tool (torch.profiler, Nsight Systems), the shim
// steps aside, says why in ShimStats.cupti_status, and the job runs on
// untouched.  An injected shim points already loaded libraries'
// cuptiSubscribe imports at its own (import_redirect.h), so that it can
// step aside for torch.profiler as a preloaded one does.  Nothing here
// exits, aborts or blocks the job for long.
//
// Implemented by cupti_lifecycle.cc, which drives the parts listed in
// cupti_collection_state.h.  Not named cupti_activity.h: that is CUPTI's
// own header, which cupti.h includes with <>, so a file of that name beside
// ours would shadow it.
#pragma once

#include <cstdint>
#include <string>

// The CUDA driver's injection entry point.  Returns 1 (success) whatever
// happens: a tracer that cannot trace must not stop the job.  Only the
// first call in a process does anything.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void);

namespace gpuos_shim {

// Makes CUPTI hand over every buffer (forced), waits up to 5 s for the
// parser to turn them into events, and flushes the event channel.  For stop
// requests; exit runs it by itself.  A no-op when CUPTI is not active.
void FlushCuptiActivity();

// Whether CUPTI activity collection is running in this process.
bool CuptiActivityActive();

// Attach: starts collection now, or arranges for it to start when the
// process initializes CUDA.  Returns whether collection is running now;
// *status says what happened (it is also the ShimStats cupti_status).
// Called on the control thread only.
bool StartCuptiForAttach(std::string* status);

// Detach: stops collection (flushing everything it holds into the event
// channel first) or cancels a pending start.  Never leaves CUPTI
// subscribed.  Called on the control thread only; bounded in time.
void StopCuptiForDetach();

// Capture windows (capture_control.h): switches the kinds this collection
// enabled (kernels, copies, memsets, syncs, and the runtime/driver API
// records unless GPUOS_CAPTURE_API_RECORDS=always) on or off, and our
// per-call timing callbacks of GPUOS_CUPTI_API_TIMING=callback unless
// GPUOS_CAPTURE_API_CALLBACKS=always.  Switching off also asks CUPTI to hand over
// what it holds, without waiting.  A no-op while collection is not running.
void SetDeviceActivityEnabled(bool enabled);

// Capture windows counted from the CUDA calls' rhythm (capture_control.h):
// our callbacks on the calls that may mark steps, on or off.  A no-op while
// collection is not running (a start turns them on where wanted).
void SetStepCallCallbacks(bool on);

// Capture windows, for long gaps between them (GPUOS_CAPTURE_FINALIZE_GAP,
// capture_control.h): SuspendCuptiBetweenWindows takes CUPTI out of the
// process as a detach does (kinds disabled, every buffer flushed into the
// event channel, cuptiFinalize), and ResumeCuptiForWindow subscribes again
// as an attach does, device kinds on, for the next window.  A suspension
// is refused (said once in cupti_status) while a stream is being captured
// into a CUDA graph, once the job has launched a CUDA graph (cuptiFinalize
// broke such a job: cupti_finalize.h), or after a context teardown or
// device reset began.
// While suspended the status stays active and says so.  Both are called
// with the capture lock held, on whatever thread makes the window edge;
// `policy` is the GPUOS_CAPTURE_FINALIZE_GAP in force, for the status.
bool SuspendCuptiBetweenWindows(const std::string& policy);
bool ResumeCuptiForWindow();
bool CuptiSuspended();
// Why CUPTI stays subscribed across a far gap; each said once in
// cupti_status (a no-op while collection is not running).
enum class StaysSubscribed : int {
  kGraphCapture = 1,    // a stream is being captured into a CUDA graph
  kContextTornDown,     // a context teardown or device reset began
  kFinalizePending,     // the last cuptiFinalize has not finished
  kUnforeseeableGap,    // nvtx= or time windows: the next one's distance is not known
  kNoStepMarks,         // steps that come from no mark running without CUPTI
  kGraphsLaunched,      // the job launches CUDA graphs, which cuptiFinalize can break
};
void NoteCuptiStaysSubscribed(StaysSubscribed why);

// Problems met so far (CUPTI errors, records CUPTI could not time, buffers
// refused because the pool was full).  Each kind is also logged once to
// stderr when GPUOS_SHIM_DEBUG is set, and named in cupti_status.
uint64_t CuptiProblemCount();

}  // namespace gpuos_shim
