// A CPU-only stand-in for CUPTI and the one CUDA driver call the shim makes
// itself, built as libcuda.so.1 in its own folder of the build tree (never
// installed), for tests/unit/shim_cupti_lifecycle_test.cc: with no GPU or
// driver on the build host, it lets the shim's collection lifecycle
// (subscribe, kinds on and off at capture window edges, the cuptiFinalize
// handshake in an API exit callback, subscribing again) run for real against
// a library that keeps CUPTI's rules that matter there:
//  - one subscriber at a time (MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
//  - callbacks only for what is enabled, domain-wide or per call id;
//  - names for a few call ids (cuptiGetCallbackName);
//  - cuptiFinalize forgets everything (subscriber, callbacks, kinds,
//    buffer and timestamp callbacks).
// No records are ever produced (buffers stay empty).  It is not CUPTI: the
// GPU checks (tests/gpu/capture_check.py) hold the shim to the real one.
// fake_cupti_* functions let the test drive and read it.
#include <cupti.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

namespace {

struct Fake {
  std::mutex mu;
  bool subscribed = false;
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  std::set<std::pair<int, uint32_t>> callbacks;  // (domain, cbid)
  std::set<int> domains;
  std::set<int> kinds;
  int subscribes = 0, finalizes = 0, flushes = 0;
};

Fake& F() {
  static Fake* fake = new Fake();
  return *fake;
}

// Makes one API call's ENTER and EXIT callbacks, where enabled.
void ApiCall(CUpti_CallbackDomain domain, uint32_t cbid, int result) {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  {
    Fake& f = F();
    std::lock_guard<std::mutex> lock(f.mu);
    if (!f.subscribed || (f.domains.count(domain) == 0 && f.callbacks.count({domain, cbid}) == 0)) {
      return;
    }
    callback = f.callback;
    userdata = f.userdata;
  }
  uint64_t correlation_data = 0;
  CUpti_CallbackData data{};
  data.functionName = "fake";
  data.correlationData = &correlation_data;
  data.functionReturnValue = &result;
  // CUPTI calls back without holding locks the subscriber could need.
  data.callbackSite = CUPTI_API_ENTER;
  callback(userdata, domain, cbid, &data);
  data.callbackSite = CUPTI_API_EXIT;
  callback(userdata, domain, cbid, &data);
}

}  // namespace

extern "C" {

CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = 130000;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult, const char** str) {
  *str = "fake CUPTI error";
  return CUPTI_SUCCESS;
}
// A few of CUPTI's names (launches the shim traces, and calls it does
// not), so that its traced-call tables are not empty.
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  static const struct {
    CUpti_CallbackDomain domain;
    uint32_t cbid;
    const char* name;
  } kNames[] = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
       "cudaLaunchKernel_v7000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020,
       "cudaDeviceReset_v3020"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
       "cuStreamBeginCapture_v2"},
  };
  for (const auto& known : kNames) {
    if (known.domain == domain && known.cbid == cbid) {
      *name = known.name;
      return CUPTI_SUCCESS;
    }
  }
  *name = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                           void* userdata) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  f.subscribed = true;
  f.callback = callback;
  f.userdata = userdata;
  ++f.subscribes;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&f);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  f.subscribed = false;
  f.callbacks.clear();
  f.domains.clear();
  return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  if (!f.subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable) {
    f.callbacks.insert({domain, cbid});
  } else {
    f.callbacks.erase({domain, cbid});
  }
  return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  if (!f.subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable) {
    f.domains.insert(domain);
  } else {
    f.domains.erase(domain);
  }
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) {
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  f.kinds.insert(kind);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  f.kinds.erase(kind);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**) {
  return CUPTI_ERROR_MAX_LIMIT_REACHED;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  ++f.flushes;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId, uint8_t) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId, uint8_t) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute, size_t*, void*) { return CUPTI_SUCCESS; }
CUptiResult cuptiFinalize() {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  f.subscribed = false;
  f.callbacks.clear();
  f.domains.clear();
  f.kinds.clear();
  ++f.finalizes;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *timestamp = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return CUPTI_SUCCESS;
}

// The driver: initialized, and each call goes through the callbacks.
CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = nullptr;
  ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 0);
  return CUDA_SUCCESS;
}

// A stream synchronize, as a training loop makes once a step (loss.item()).
CUresult cuStreamSynchronize(CUstream) {
  ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 0);
  return CUDA_SUCCESS;
}

// For the test: a stream's capture into a CUDA graph begins or ends, as
// cudaStreamBeginCapture and cudaStreamEndCapture would make it.
void fake_cupti_begin_graph_capture() {
  ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, 0);
}
void fake_cupti_end_graph_capture() {
  ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, 0);
}
// A CUDA graph replayed, as cuGraphLaunch would.
void fake_cupti_graph_launch() { ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 0); }
int fake_cupti_kind_enabled(int kind) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.kinds.count(kind) > 0;
}
// Whether CUPTI would call the subscriber for this call (its domain or
// the call id enabled), as cuptiGetCallbackState says.
int fake_cupti_callback_enabled(int domain, uint32_t cbid) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.subscribed && (f.domains.count(domain) > 0 || f.callbacks.count({domain, cbid}) > 0);
}
int fake_cupti_subscribed() {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.subscribed;
}
int fake_cupti_subscribes() {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.subscribes;
}
int fake_cupti_finalizes() {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.finalizes;
}

}  // extern "C"
