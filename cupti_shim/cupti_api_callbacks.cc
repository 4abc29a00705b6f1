// The shim's CUPTI callback and what it serves: timing API calls into
// per-thread rings, flushing at context teardown, and the cuptiFinalize
// handshake; the API tables and the per-call callback switches.  See
// cupti_api_callbacks.h.
#include "cupti_api_callbacks.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "capture_control.h"
#include "cupti_activity_api.h"
#include "cupti_finalize.h"
#include "cupti_record_encoder.h"
#include "event_channel.h"

namespace gpuos_shim {
namespace {

// API calls timed by callbacks: each thread's ring holds this many (40
// bytes each), which at 400,000 calls/s on one thread (a launch loop's
// runtime and driver calls) lasts 80 ms; the parser empties the rings every
// 10 ms (cupti_parser.h).
constexpr size_t kApiRingRecords = size_t{1} << 15;

// Entry: the start time goes where CUPTI keeps it for the exit (the top
// bit marks it ours: a call already under way when the callbacks were
// switched on has no entry).  Exit: one record into the thread's ring.
// Nothing is kept per thread between the two, so a call whose exit never
// comes (switched off outside a capture window) leaves nothing behind; one
// whose entry came before the last switch-on (it spanned a time off) is
// not timed, like one with no entry.
constexpr uint64_t kEnteredMark = uint64_t{1} << 63;
void TimeApiCall(State& s, bool driver, CUpti_CallbackId cbid, const CUpti_CallbackData& call) {
  if (!IsTracedApi(s, driver, cbid) || s.api_timing_gated_off.load(std::memory_order_relaxed)) return;
  if (call.callbackSite == CUPTI_API_ENTER) {
    *call.correlationData = MonotonicNs() | kEnteredMark;
    return;
  }
  const uint64_t entered = *call.correlationData;
  const uint64_t end = MonotonicNs();
  const uint64_t start = entered & ~kEnteredMark;
  if ((entered & kEnteredMark) == 0 || start > end ||
      start < s.api_callbacks_on_ns.load(std::memory_order_acquire)) {
    return;
  }
  TimedApiCall timed;
  timed.start_ns = start;
  timed.end_ns = end;
  timed.correlation_id = call.correlationId;
  timed.cbid = cbid;
  timed.tid = CurrentTid();
  timed.return_value =
      call.functionReturnValue != nullptr ? *static_cast<const int*>(call.functionReturnValue) : 0;
  timed.driver = driver;
  s.api_rings.load(std::memory_order_acquire)->Record(timed);
}

// The calls that begin and end capturing a stream into a CUDA graph.
constexpr CUpti_CallbackId kRuntimeCaptureBegins[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030};
constexpr CUpti_CallbackId kRuntimeCaptureEnds[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000};
constexpr CUpti_CallbackId kDriverCaptureBegins[] = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz};
constexpr CUpti_CallbackId kDriverCaptureEnds[] = {CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
                                                   CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz};
// The calls that replay a CUDA graph: a process that ran one never gets
// cuptiFinalize (cupti_finalize.h says why).
constexpr CUpti_CallbackId kRuntimeGraphLaunches[] = {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};
constexpr CUpti_CallbackId kDriverGraphLaunches[] = {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
                                                     CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
// The driver calls that may mark a training step (the synchronizes, the
// copies to and from the host, graph launches), whose rhythm counts steps
// for capture windows in a job with no step marks (capture_control.h).
// Driver calls, so that runtime and driver users alike are seen; a few a
// step, never per kernel.
constexpr CUpti_CallbackId kDriverStepCalls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,          CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,       CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,           CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,           CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy,                  CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,             CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,             CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};

// cudaErrorStreamCaptureInvalidated and CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
// the capture ended all the same.
constexpr int kCaptureInvalidated = 901;

template <size_t N>
bool OneOf(const CUpti_CallbackId (&ids)[N], CUpti_CallbackId cbid) {
  for (CUpti_CallbackId id : ids) {
    if (id == cbid) return true;
  }
  return false;
}

// Our callbacks that serve more than timing, and so stay on outside capture
// windows (and when timing gives up) even where they time a traced call:
// the flush at cudaDeviceReset, the count of streams being captured into
// graphs, which the finalize safety reads, and the calls whose rhythm
// counts steps.
bool StaysOnOutsideWindows(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020 ||
           OneOf(kRuntimeCaptureBegins, cbid) || OneOf(kRuntimeCaptureEnds, cbid) ||
           OneOf(kRuntimeGraphLaunches, cbid);
  }
  return OneOf(kDriverCaptureBegins, cbid) || OneOf(kDriverCaptureEnds, cbid) ||
         OneOf(kDriverGraphLaunches, cbid) || (OneOf(kDriverStepCalls, cbid) && CaptureCountsCallRhythm());
}

// GPUOS_CAPTURE_API_CALLBACKS=always: the timing callbacks stay on outside
// capture windows too (to measure what they cost there).
bool GateApiCallbacks() {
  const char* setting = getenv("GPUOS_CAPTURE_API_CALLBACKS");
  return setting == nullptr || strcmp(setting, "always") != 0;
}

// Notes a graph launch (once: the first makes the flag true; later ones only
// read it), and counts the streams being captured, at the exit of a
// capture's begin (that succeeded) and end (that ended it).
void NoteGraphCall(State& s, bool driver, CUpti_CallbackId cbid, const CUpti_CallbackData& call) {
  if (call.callbackSite != CUPTI_API_EXIT) return;
  if (driver ? OneOf(kDriverGraphLaunches, cbid) : OneOf(kRuntimeGraphLaunches, cbid)) {
    if (!s.graphs_launched.load(std::memory_order_relaxed)) s.graphs_launched.store(true);
    return;
  }
  const bool begins = driver ? OneOf(kDriverCaptureBegins, cbid) : OneOf(kRuntimeCaptureBegins, cbid);
  const bool ends = driver ? OneOf(kDriverCaptureEnds, cbid) : OneOf(kRuntimeCaptureEnds, cbid);
  if (!begins && !ends) return;
  const int result =
      call.functionReturnValue != nullptr ? *static_cast<const int*>(call.functionReturnValue) : 0;
  std::atomic<int>& count = driver ? s.driver_graph_captures : s.runtime_graph_captures;
  if (begins && result == 0) count.fetch_add(1);
  if (ends && (result == 0 || result == kCaptureInvalidated) && count.load() > 0) count.fetch_sub(1);
}

}  // namespace

bool IsTracedApi(const State& s, bool driver, uint32_t cbid) {
  const std::vector<bool>& traced = driver ? s.driver_traced : s.runtime_traced;
  return cbid < traced.size() && traced[cbid];
}

void CUPTIAPI OnCuptiCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid, const void* data) {
  State& s = S();
  if ((domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) &&
      s.finalize_state.load(std::memory_order_relaxed) == kFinalizeRequested) {
    if (static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_EXIT) {
      FinalizeInCallback();
    }
    return;
  }
  if (InForkChild() || !s.active.load(std::memory_order_relaxed)) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto& call = *static_cast<const CUpti_CallbackData*>(data);
    if (s.api_by_callbacks.load(std::memory_order_relaxed)) {
      TimeApiCall(s, domain == CUPTI_CB_DOMAIN_DRIVER_API, cbid, call);
    }
    NoteGraphCall(s, domain == CUPTI_CB_DOMAIN_DRIVER_API, cbid, call);
    // Cheapest first: with API timing by callbacks every traced call comes here.
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && call.callbackSite == CUPTI_API_EXIT && CaptureCountsCallRhythm() &&
        OneOf(kDriverStepCalls, cbid) && cbid < s.driver_names.size()) {
      CaptureOnStepCallReturn(cbid, s.driver_names[cbid], CurrentTid(), MonotonicNs());
    }
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    s.context_torn_down = true;
    RequestFlushFromCallback();
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
             cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020 &&
             static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_ENTER) {
    s.context_torn_down = true;
    RequestFlushFromCallback();
  }
}

namespace {

// Names and the traced allow-list of every callback id of one API domain.
// Probes past our headers' CBID_SIZE so a newer CUPTI's new ids get names.
void BuildApiTable(const CuptiApi& api, bool driver, std::vector<std::string>* names,
                   std::vector<bool>* traced) {
  const CUpti_CallbackDomain domain =
      driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
  const uint32_t known = driver ? static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_SIZE)
                                : static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_SIZE);
  const uint32_t size = 2 * known;
  names->assign(size, std::string());
  traced->assign(size, false);
  for (uint32_t cbid = 1; cbid < size; ++cbid) {
    const char* name = nullptr;
    if (api.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
    (*names)[cbid] = ApiDisplayName(driver, name);
    (*traced)[cbid] = IsTracedApiName(name);
  }
}

}  // namespace

void BuildApiTablesOnce(const CuptiApi& api) {
  State& s = S();
  if (s.tables_built) return;
  // Read by the parser without a lock: written once, before it starts.
  BuildApiTable(api, /*driver=*/false, &s.runtime_names, &s.runtime_traced);
  BuildApiTable(api, /*driver=*/true, &s.driver_names, &s.driver_traced);
  s.tables_built = true;
}

void EnableTeardownCallbacks(const CuptiApi& api) {
  State& s = S();
  CuptiOk("cuptiEnableCallback(CONTEXT_DESTROY_STARTING)",
          api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                             CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  CuptiOk("cuptiEnableCallback(cudaDeviceReset)",
          api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                             CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020));
}

void EnableGraphCallbacks(const CuptiApi& api) {
  State& s = S();
  for (CUpti_CallbackId cbid : kRuntimeCaptureBegins) {
    api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
  }
  for (CUpti_CallbackId cbid : kRuntimeCaptureEnds) {
    api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
  }
  for (CUpti_CallbackId cbid : kDriverCaptureBegins) {
    api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
  for (CUpti_CallbackId cbid : kDriverCaptureEnds) {
    api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
  for (CUpti_CallbackId cbid : kRuntimeGraphLaunches) {
    api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
  }
  for (CUpti_CallbackId cbid : kDriverGraphLaunches) {
    api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
}

void SwitchStepCallCallbacks(const CuptiApi& api, bool on) {
  State& s = S();
  for (CUpti_CallbackId cbid : kDriverStepCalls) {
    // A graph launch's callback stays: the finalize safety needs it.
    if (!on && OneOf(kDriverGraphLaunches, cbid)) continue;
    api.EnableCallback(on ? 1 : 0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
}

bool EnableApiCallbacks(const CuptiApi& api, bool want_runtime, bool want_driver) {
  State& s = S();
  ApiCallRings* rings = s.api_rings.load(std::memory_order_acquire);
  if (rings == nullptr) {
    rings = new (std::nothrow) ApiCallRings(kApiRingRecords);
    if (rings == nullptr) return false;
    s.api_rings.store(rings, std::memory_order_release);
  } else {
    // A callback that was already running when the last collection
    // stopped may have written a record after its final drain: lost, and
    // counted so.
    AddShimDroppedEvents(rings->Drain([](const TimedApiCall&) {}));
  }
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> enabled;
  auto enable_domain = [&](CUpti_CallbackDomain domain, const std::vector<bool>& traced) {
    for (uint32_t cbid = 0; cbid < traced.size(); ++cbid) {
      if (!traced[cbid]) continue;
      if (api.EnableCallback(1, s.subscriber, domain, cbid) != CUPTI_SUCCESS) return false;
      enabled.emplace_back(domain, cbid);
    }
    return true;
  };
  s.api_by_callbacks = true;
  s.api_timing_gated_off = false;
  s.api_callbacks_on_ns.store(MonotonicNs(), std::memory_order_release);
  const bool all_on =
      (!want_runtime || enable_domain(CUPTI_CB_DOMAIN_RUNTIME_API, s.runtime_traced)) &&
      (!want_driver || enable_domain(CUPTI_CB_DOMAIN_DRIVER_API, s.driver_traced));
  if (!all_on) {
    s.api_by_callbacks = false;
    for (const auto& [domain, cbid] : enabled) {
      if (!StaysOnOutsideWindows(domain, cbid)) api.EnableCallback(0, s.subscriber, domain, cbid);
    }
  }
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> gated;
  for (const auto& [domain, cbid] : enabled) {
    if (all_on && GateApiCallbacks() && !StaysOnOutsideWindows(domain, cbid)) {
      gated.emplace_back(domain, cbid);
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.device_mu);
    s.gated_api_callbacks = std::move(gated);
  }
  if (all_on) return true;
  ReportProblem("API callbacks", "cuptiEnableCallback failed for a traced API call: API calls "
                                 "recorded through activity records instead");
  return false;
}

void SwitchGatedApiCallbacksLocked(bool on) {
  State& s = S();
  if (s.gated_api_callbacks.empty()) return;
  if (on) s.api_callbacks_on_ns.store(MonotonicNs(), std::memory_order_release);
  s.api_timing_gated_off.store(!on, std::memory_order_relaxed);
  CUptiResult failed = CUPTI_SUCCESS;
  for (const auto& [domain, cbid] : s.gated_api_callbacks) {
    const CUptiResult result = s.api->EnableCallback(on ? 1 : 0, s.subscriber, domain, cbid);
    if (result != CUPTI_SUCCESS) failed = result;
  }
  if (failed != CUPTI_SUCCESS) CuptiOk("cuptiEnableCallback (capture window)", failed);
}

}  // namespace gpuos_shim
