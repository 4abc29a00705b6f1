// Capture windows in a traced process (gpuos-trace --capture, --always-on,
// `gpuos-trace ctl --pid PID capture N`): full CUDA detail (CUPTI's
// records: kernels, copies, memsets, syncs, and CUDA API calls unless
// GPUOS_CAPTURE_API_RECORDS=always, or GPUOS_CAPTURE_API_CALLBACKS=always
// where our callbacks time them) only inside windows, the rest of the
// recording (OS side, NVTX, the Python hook's marks) all the time.
//
// The spec comes from GPUOS_CAPTURE (set by gpuos-trace for launched and
// prepared jobs) or a "capture <spec>" request on the control socket (an
// attach with --capture); "capture N" asks for the next N steps.  Steps are
// counted live from the marks the job has: NVTX ranges named like steps
// (the report's default rule: "step 12", "iteration 3", "Batch 7",
// "ProfilerStep#5"), else the Python hook's marks, a step ending where
// optimizer.step() returns (or loss.backward(), in loops with no
// optimizer); there step i runs from the (i-1)th one's return to the
// i-th's, as the report numbers steps from these marks (backward passes
// count from the second one's return, step 2).  Only the
// first thread with NVTX step ranges counts.  A job with neither kind of
// mark counts steps from the rhythm of its CUDA calls, where CUPTI runs
// (CaptureOnStepCallReturn; from the 17th step on), for step-count specs;
// every=DURATION specs, which take CUPTI out of the process between
// windows, fall back to time windows there.  Each edge goes to the agent as
// a CaptureWindow event, and turns CUPTI's device kinds on or off
// (cupti_injection.h).
//
// Far gaps (GPUOS_CAPTURE_FINALIZE_GAP, default 200 ms, "off" for never;
// capture_windows.h): at a window's end, or at a step's end
// between windows, when the next window is that far (by the spec's step
// count, or that count times the last step's length) or none is known to
// come, CUPTI is taken out of the process altogether, and the next window
// subscribes again (cupti_injection.h).  Every edge comes from what runs
// without CUPTI: NVTX ranges, the Python hook's marks, the timer (time and
// every=DURATION specs), the control socket.  nvtx= windows, whose gaps
// cannot be foreseen, keep CUPTI subscribed.
//
// Without a spec nothing changes: every hook is one relaxed atomic load.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuos_shim {

// Whether a capture spec is in force in this process.
bool CaptureWindowsInUse();
// Whether CUPTI's device kinds should be on now: no spec, or a window open.
bool CaptureDetailWanted();

// The shim's NVTX handlers call these for every range begun and ended
// while recording (`ts_ns` is the range's own timestamp).
void CaptureOnRangeBegin(std::string_view domain, std::string_view name, uint64_t ts_ns, uint32_t tid);
void CaptureOnRangeEnd(std::string_view domain, std::string_view name, uint64_t ts_ns, uint32_t tid);

// The shim's CUPTI callback calls this at the return of each CUDA call
// that may mark steps (a synchronize, a copy, a graph launch), on the
// calling thread, with CUPTI's id and name for the call.  In a job with no
// step marks, under a spec that is not driven by the timer, these calls'
// rhythm counts the steps (live_step_rhythm.h): each step's end goes to the
// agent as an NVTX mark in the domain "gpuos.rhythm" named after the call,
// so that the report's steps are the ones the windows followed.  Never
// blocks for long: where the capture lock is busy past 2 ms the edge waits
// for the next step.
void CaptureOnStepCallReturn(uint32_t call_id, std::string_view call_name, uint32_t tid, uint64_t end_ns);
// Whether those calls are wanted now (a spec that counts steps that way,
// in a job that has marked none so far): one atomic load, so that CUPTI's
// start can ask with the capture lock held.
bool CaptureCountsCallRhythm();

// The control socket's "capture <argument>": a spec to use from now on, or
// a number of steps to capture next.  Returns the reply ("capture ..." or
// "error ...").
std::string HandleCaptureRequest(std::string_view argument);

// At detach: a spec set by the agent's request goes; GPUOS_CAPTURE's stays.
void ResetCaptureAfterDetach();

}  // namespace gpuos_shim
