// CUPTI's activity buffers, the kinds the shim enables and disables, and
// flushing; see cupti_activity_api.h.
#include "cupti_activity_api.h"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "cupti_api_callbacks.h"
#include "cupti_parser.h"
#include "event_channel.h"

namespace gpuos_shim {
namespace {

// ---- CUPTI's buffer callbacks: short, and never call CUPTI ---------------

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // as many as fit
  if (InForkChild()) return;
  // No buffer (pool exhausted): CUPTI drops records and counts them
  // (cuptiActivityGetNumDroppedRecords).
  ActivityBufferPool& pool = S().buffers;
  *buffer = pool.Take();
  if (*buffer != nullptr) *size = pool.buffer_bytes();
}

void CUPTIAPI BufferCompleted(CUcontext /*context*/, uint32_t /*stream_id*/, uint8_t* buffer,
                              size_t /*size*/, size_t valid_bytes) {
  if (buffer == nullptr || InForkChild()) return;
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.queue_mu);
    s.completed.push_back({buffer, valid_bytes});
    ++s.enqueued_buffers;
  }
  s.queue_cv.notify_one();
}

// GPUOS_CUPTI_KINDS (gpuos-trace --cuda-records sets it): a comma list of
// kernel, memcpy, memset, sync, runtime, driver that narrows what is
// recorded, trading detail for overhead; "" records all.  Read once.
const std::string& RequestedKinds() {
  static const std::string kinds = [] {
    const char* env = getenv("GPUOS_CUPTI_KINDS");
    return std::string(env ? env : "");
  }();
  return kinds;
}

// Per-call filtering inside CUPTI where it can (records of untraced calls
// are then never written); otherwise every call of the kind is recorded and
// the parser filters.  CUPTI's per-call switches take effect only when set
// before CUDA is initialized (seen on an H200, CUPTI 13.0: set mid-run they
// record nothing), so a start in a running CUDA process (attach) enables
// the whole kinds.
std::string EnableApiRecords(const CuptiApi& api, bool cuda_running) {
  State& s = S();
  s.api_filtered_in_cupti = false;
  const bool want_runtime = KindWanted("runtime");
  const bool want_driver = KindWanted("driver");
  if (!want_runtime && !want_driver) return "no API calls";  // KindsNote() says why
  // GPUOS_CUPTI_API_TIMING=callback: our own entry/exit callbacks instead
  // of CUPTI's RUNTIME/DRIVER records.  Not the default: on an H200 they
  // cost each traced call 120-400 ns more (docs/archive/gpu-results.md, "API
  // calls timed by callbacks").
  const char* timing = getenv("GPUOS_CUPTI_API_TIMING");
  if (timing && std::string(timing) == "callback" &&
      EnableApiCallbacks(api, want_runtime, want_driver)) {
    return "API calls timed by callbacks";
  }
  // GPUOS_CUPTI_API_FILTER=shim enables the whole API kinds and filters in
  // the parser instead (to measure which costs the job less).
  const char* filter = getenv("GPUOS_CUPTI_API_FILTER");
  const bool filter_in_cupti = !(filter && std::string(filter) == "shim");
  if (filter_in_cupti && !cuda_running && api.ActivityEnableRuntimeApi != nullptr &&
      api.ActivityEnableDriverApi != nullptr) {
    bool ok = true;
    for (uint32_t cbid = 0; want_runtime && ok && cbid < s.runtime_traced.size(); ++cbid) {
      if (s.runtime_traced[cbid]) ok = api.ActivityEnableRuntimeApi(cbid, 1) == CUPTI_SUCCESS;
    }
    for (uint32_t cbid = 0; want_driver && ok && cbid < s.driver_traced.size(); ++cbid) {
      if (s.driver_traced[cbid]) ok = api.ActivityEnableDriverApi(cbid, 1) == CUPTI_SUCCESS;
    }
    s.api_filtered_in_cupti = ok;
    if (ok) return "API calls filtered in CUPTI";
  }
  // Enabling the kinds overrides any per-call settings made above.
  const bool runtime = want_runtime && CuptiOk("cuptiActivityEnable(RUNTIME)",
                                               api.ActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  const bool driver = want_driver && CuptiOk("cuptiActivityEnable(DRIVER)",
                                             api.ActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
  if (!runtime && !driver) return "no API calls";
  return filter_in_cupti && cuda_running
             ? "API calls filtered by the shim (CUDA was running at the start)"
             : "API calls filtered by the shim";
}

// The device kinds BeginCollection enabled (all on now), for capture
// windows to switch.
void RememberDeviceKinds(CUpti_ActivityKind kernel_kind, bool copies, bool memsets, bool syncs) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.device_mu);
  s.device_kinds.clear();
  if (kernel_kind != CUPTI_ACTIVITY_KIND_INVALID) s.device_kinds.push_back(kernel_kind);
  if (copies) {
    s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY);
    s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY2);
  }
  if (memsets) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_MEMSET);
  if (syncs) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  // API records cost the launching thread as much as kernel records
  // (docs/gpu-results.md): outside windows they go too, unless
  // GPUOS_CAPTURE_API_RECORDS=always.  Switched back on mid-run, a kind
  // records every call (CUPTI's per-call switches are set before cuInit
  // only) and the parser keeps the traced ones.  API calls timed by our
  // callbacks are switched apart (SwitchGatedApiCallbacksLocked).
  const char* api_setting = getenv("GPUOS_CAPTURE_API_RECORDS");
  const bool gate_api = api_setting == nullptr || strcmp(api_setting, "always") != 0;
  if (gate_api && !s.api_by_callbacks.load()) {
    if (KindWanted("runtime")) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (KindWanted("driver")) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  s.device_on = true;
}

}  // namespace

CUptiResult RegisterBufferCallbacks(const CuptiApi& api) {
  return api.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
}

void ReturnBuffer(uint8_t* buffer) { S().buffers.Return(buffer); }

void FreePooledBuffers() { S().buffers.FreeIdle(); }

void ConfigureActivityBuffers(const CuptiApi& api) {
  const char* env = getenv("GPUOS_CUPTI_ZEROED_BUFFERS");
  bool zeroed = false;  // otherwise CUPTI zeroes each buffer itself (its default)
  if ((env == nullptr || strcmp(env, "0") != 0) && api.ActivitySetAttribute != nullptr) {
    uint8_t one = 1;
    size_t size = sizeof(one);
    zeroed = CuptiOk("cuptiActivitySetAttribute(ZEROED_OUT_ACTIVITY_BUFFER)",
                     api.ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                                              &size, &one));
  }
  S().buffers.SetZeroed(zeroed);
}

bool KindWanted(const char* kind) {
  const std::string& kinds = RequestedKinds();
  if (kinds.empty()) return true;
  std::string needle = kind;
  size_t pos = 0;
  while (pos <= kinds.size()) {
    size_t comma = kinds.find(',', pos);
    if (comma == std::string::npos) comma = kinds.size();
    if (kinds.compare(pos, comma - pos, needle) == 0) return true;
    pos = comma + 1;
  }
  return false;
}

// ", only kernel,memcpy records (...)" when the kinds are narrowed, so a
// trace without API calls says why; else "".
std::string KindsNote() {
  if (RequestedKinds().empty()) return "";
  return ", only " + RequestedKinds() + " records (--cuda-records, GPUOS_CUPTI_KINDS)";
}

EnabledKinds EnableActivityKinds(const CuptiApi& api, bool cuda_running) {
  bool serialised_kernels = false;
  const bool want_kernels = KindWanted("kernel");
  bool kernels = want_kernels &&
                 api.ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
  if (want_kernels && !kernels) {
    // Serialises kernels, but is better than no kernels.
    kernels =
        CuptiOk("cuptiActivityEnable(KERNEL)", api.ActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL));
    serialised_kernels = kernels;
  }
  const bool want_copies = KindWanted("memcpy");
  const bool copies = want_copies && CuptiOk("cuptiActivityEnable(MEMCPY)",
                                             api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  if (want_copies) {
    CuptiOk("cuptiActivityEnable(MEMCPY2)", api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2));
  }
  if (KindWanted("memset")) {
    CuptiOk("cuptiActivityEnable(MEMSET)", api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  }
  const bool syncs = KindWanted("sync") &&
                     CuptiOk("cuptiActivityEnable(SYNCHRONIZATION)",
                             api.ActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  if (syncs && api.ActivityEnableAllSyncRecords != nullptr) {
    // Not one record per cudaEventQuery/cudaStreamQuery poll that found the
    // work unfinished (PyTorch polls a lot).
    CuptiOk("cuptiActivityEnableAllSyncRecords", api.ActivityEnableAllSyncRecords(0));
  }
  EnabledKinds enabled;
  enabled.api_records = EnableApiRecords(api, cuda_running);
  RememberDeviceKinds(kernels ? (serialised_kernels ? CUPTI_ACTIVITY_KIND_KERNEL
                                                    : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                              : CUPTI_ACTIVITY_KIND_INVALID,
                      want_copies && copies, KindWanted("memset"), syncs);
  enabled.kernels = kernels;
  enabled.copies = copies;
  enabled.serialised_kernels = serialised_kernels;
  return enabled;
}

void DisableAllKinds(const CuptiApi& api) {
  State& s = S();
  for (CUpti_ActivityKind kind : kAllKinds) api.ActivityDisable(kind);
  if (s.api_filtered_in_cupti) {
    for (uint32_t cbid = 0; cbid < s.runtime_traced.size(); ++cbid) {
      if (s.runtime_traced[cbid]) api.ActivityEnableRuntimeApi(cbid, 0);
    }
    for (uint32_t cbid = 0; cbid < s.driver_traced.size(); ++cbid) {
      if (s.driver_traced[cbid]) api.ActivityEnableDriverApi(cbid, 0);
    }
  }
}

// Asks CUPTI for what it has and has the parser flush the channel once it
// has turned that into events.  Does not wait: it runs on the job's thread,
// inside CUDA calls.
void RequestFlushFromCallback() {
  State& s = S();
  CuptiOk("cuptiActivityFlushAll", s.api->ActivityFlushAll(0));
  {
    std::lock_guard<std::mutex> lock(s.queue_mu);
    s.flush_events_requested = true;
  }
  s.queue_cv.notify_one();
}

// Returns whether the parser took everything in time.
bool FlushAndDrain(std::chrono::milliseconds timeout) {
  State& s = S();
  bool drained = true;
  // Delivers every buffer through BufferCompleted before it returns.
  CuptiOk("cuptiActivityFlushAll", s.api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (std::this_thread::get_id() != s.parser_thread) {
    std::unique_lock<std::mutex> lock(s.queue_mu);
    const uint64_t target = s.enqueued_buffers;
    drained =
        s.drained_cv.wait_for(lock, timeout, [&s, target] { return s.parsed_buffers >= target; });
    lock.unlock();
    if (!drained) {
      ReportProblem("drain timeout",
                    "the CUPTI parser did not finish within the flush timeout; the last "
                    "CUDA activity may be missing");
    }
  }
  DrainTimedApiCalls();
  CollectDrops();
  FlushEvents();
  return drained;
}

void SetDeviceActivityEnabled(bool enabled) {
  State& s = S();
  if (InForkChild() || !s.active.load()) return;
  std::lock_guard<std::mutex> lock(s.device_mu);
  if (s.device_kinds.empty() || s.device_on == enabled) return;
  for (CUpti_ActivityKind kind : s.device_kinds) {
    if (enabled) {
      CuptiOk("cuptiActivityEnable (capture window)", s.api->ActivityEnable(kind));
    } else {
      s.api->ActivityDisable(kind);
    }
  }
  SwitchGatedApiCallbacksLocked(enabled);
  s.device_on = enabled;
  // The window's records go to the parser now rather than at the next
  // periodic flush; not forced, so the job's thread does not wait.
  if (!enabled) RequestFlushFromCallback();
}

void SetStepCallCallbacks(bool on) {
  State& s = S();
  if (InForkChild() || !s.active.load()) return;
  std::lock_guard<std::mutex> lock(s.device_mu);
  SwitchStepCallCallbacks(*s.api, on);
}

}  // namespace gpuos_shim
