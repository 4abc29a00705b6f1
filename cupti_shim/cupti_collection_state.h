// The state of CUDA activity collection in this process, shared by its
// parts (internal to the shim):
//   cupti_lifecycle.cc       the controller: launch, attach, detach, stepping
//                            aside, fork, exit;
//   cupti_activity_api.cc    buffers, enabling and disabling kinds, flushing;
//   cupti_parser.cc          the parser thread (records -> events);
//   cupti_api_callbacks.cc   our CUPTI callback, API call timing, API tables;
//   cupti_finalize.cc        detaching CUPTI from the process (cuptiFinalize).
// The rule every part keeps (Kineto's): no lock of ours is held while
// calling into CUPTI, which may call back into us from inside (an ABBA
// deadlock otherwise); CUPTI's callbacks only take short locks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cupti_api_call_rings.h"
#include "cupti_buffer_pool.h"
#include "cupti_loader.h"
#include "cupti_timestamps.h"

namespace gpuos_shim {

using Clock = std::chrono::steady_clock;

// How long a stop or the exit waits for the parser to take every buffer.
constexpr auto kExitDrainTimeout = std::chrono::seconds(5);

// Every kind the shim may enable; a stop disables them all.
constexpr CUpti_ActivityKind kAllKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,            CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER};

// Where collection stands.  Only a thread that moved it out of kOff (or kOn)
// may move it on; the others wait or give up.
enum Phase : int { kOff, kStarting, kOn, kStopping };
// The cuptiFinalize handshake between a stop and the API callback.
enum FinalizeState : int { kNoFinalize, kFinalizeRequested, kFinalizing, kFinalized };

struct CompletedBuffer {
  uint8_t* data;
  size_t valid_bytes;
};

struct State {
  const CuptiApi* api = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;
  pid_t owner_pid = 0;
  std::atomic<int> phase{kOff};
  // Records are being collected (phase kOn and not yet stopping).
  std::atomic<bool> active{false};
  // Set in a fork child: CUPTI's state and our parser thread belong to the
  // parent, and its locks may have been held mid-fork.
  std::atomic<bool> in_fork_child{false};
  // Attach: an agent wants collection (set by attach, cleared by detach).
  std::atomic<bool> wanted{false};
  // InitializeInjection ran: the process is inside or past cuInit.
  std::atomic<bool> cuda_up{false};
  // Attached before cuInit: InitializeInjection is to start collection.
  std::atomic<bool> awaiting_cuinit{false};
  // Between capture windows CUPTI was taken out of the process
  // (SuspendCuptiBetweenWindows); the next window subscribes again.
  std::atomic<bool> suspended{false};
  uint64_t suspensions = 0;  // under problem_mu
  // Streams being captured into CUDA graphs, counted from our callbacks
  // while subscribed (runtime and driver calls apart: a runtime call makes
  // a driver call), and whether a context teardown or device reset began:
  // CUPTI is not taken out of the process then.
  std::atomic<int> runtime_graph_captures{0};
  std::atomic<int> driver_graph_captures{0};
  // A CUDA graph was launched since CUPTI was subscribed: never finalize.
  std::atomic<bool> graphs_launched{false};
  std::atomic<bool> context_torn_down{false};
  // The parser may call CUPTI on its own (periodic flush, drop counts);
  // parser_in_cupti lets a stop or exit wait out a call it began (set, then
  // check, on both sides, so one of them sees the other).
  std::atomic<bool> parser_may_call_cupti{false};
  std::atomic<bool> parser_in_cupti{false};
  // API records are enabled per call (cuptiActivityEnableRuntimeApi...).
  bool api_filtered_in_cupti = false;
  // API calls are timed by our callbacks into api_rings (created once per
  // process, never destroyed; published before api_by_callbacks is set),
  // not by CUPTI's RUNTIME/DRIVER records.
  std::atomic<bool> api_by_callbacks{false};
  std::atomic<ApiCallRings*> api_rings{nullptr};
  std::atomic<int> finalize_state{kNoFinalize};
  std::atomic<int> finalize_result{CUPTI_SUCCESS};
  // Done once per process, by whichever start comes first (the phase
  // handshake serializes starts).
  bool tables_built = false;
  bool parser_started = false;
  bool atexit_registered = false;
  std::thread::id parser_thread;

  // Buffers CUPTI may fill.
  ActivityBufferPool buffers;
  std::atomic<uint64_t> refused_reported{0};

  // Buffers CUPTI has filled, waiting for the parser.
  std::mutex queue_mu;
  std::condition_variable queue_cv;    // wakes the parser
  std::condition_variable drained_cv;  // wakes FlushCuptiActivity
  std::deque<CompletedBuffer> completed;
  uint64_t enqueued_buffers = 0;
  uint64_t parsed_buffers = 0;
  bool flush_events_requested = false;

  // CUPTI's clock and its mapping onto CLOCK_MONOTONIC.
  CuptiTimestamps timestamps;

  // Per API domain, indexed by cbid; written once during initialisation.
  std::vector<std::string> runtime_names, driver_names;
  std::vector<bool> runtime_traced, driver_traced;

  // cupti_status is base_status followed by the first problems met.
  std::mutex problem_mu;
  std::string base_status;
  std::string problem_text;
  std::string capture_note;  // how capture windows use CUPTI, when it matters
  std::vector<std::string> problem_kinds;
  std::atomic<uint64_t> problems{0};
  bool debug = false;

  // Capture windows (capture_control.h): the device kinds this collection
  // enabled, switched off outside windows.  device_mu serializes the
  // switching; CUPTI's callbacks never take it.
  std::mutex device_mu;
  std::vector<CUpti_ActivityKind> device_kinds;
  bool device_on = false;
  // The same for our per-call timing callbacks (GPUOS_CUPTI_API_TIMING=
  // callback): the (domain, cbid) pairs switched with the kinds (empty with
  // GPUOS_CAPTURE_API_CALLBACKS=always); under device_mu.
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> gated_api_callbacks;
  // When they were last switched on (CLOCK_MONOTONIC ns): a call whose
  // entry came before that is not timed (cupti_api_callbacks.cc).
  std::atomic<uint64_t> api_callbacks_on_ns{0};
  // Set while those are switched off: the callbacks that stay on outside
  // windows for other reasons (graph calls, the steps' rhythm) time nothing.
  std::atomic<bool> api_timing_gated_off{false};
};

// Never destroyed: CUPTI and our thread may still use it while static
// destructors run at exit.
State& S();

inline bool InForkChild() { return S().in_fork_child.load(std::memory_order_relaxed); }

// Counts a problem; the first of each kind is logged (debug only) and
// named in cupti_status.
void ReportProblem(const std::string& kind, const std::string& detail);

// Checks a CUPTI result; never called with one of our locks held.
bool CuptiOk(const char* call, CUptiResult result);

// Steps aside: CUPTI stays off and the job carries on; `why` becomes the
// status.
void Disable(const std::string& why);

// cupti_status as it stands (base status, capture note and problems).
std::string CurrentStatus();
// The same, with problem_mu held by the caller.
std::string ComposeStatusLocked(const State& s);
// Whether ShimStats says CUPTI is active: collecting, or taken out of the
// process between capture windows only.
inline bool StatusActive(const State& s) { return s.active.load() || s.suspended.load(); }

}  // namespace gpuos_shim
