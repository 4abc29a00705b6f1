// Detaching CUPTI from the process; see cupti_finalize.h.
#include "cupti_finalize.h"

#include <dlfcn.h>

#include <cstdlib>
#include <thread>

namespace gpuos_shim {
namespace {

// How long a stop waits for cuptiFinalize in an API's exit callback.
constexpr auto kFinalizeTimeout = std::chrono::seconds(5);
// CUPTI API version of CUDA 12.6: cuptiFinalize with CUDA graphs crashed
// before it (pytorch/pytorch#112507, fixed in 12.6 per pytorch#146604).
constexpr uint32_t kMinCuptiVersionToFinalize = 24;

}  // namespace

Driver ProcessDriver() {
  Driver driver;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    dlerror();
    return driver;
  }
  // The handle is kept: libcuda is never unloaded from a process anyway.
  driver.loaded = true;
  driver.CtxGetCurrent = reinterpret_cast<CUresult (*)(CUcontext*)>(dlsym(handle, "cuCtxGetCurrent"));
  return driver;
}

bool CudaInitialized(const Driver& driver) {
  if (driver.CtxGetCurrent == nullptr) return false;
  CUcontext context = nullptr;
  // (CUDA's stub library answers CUDA_ERROR_STUB_LIBRARY to everything.)
  return driver.CtxGetCurrent(&context) == CUDA_SUCCESS;
}

// Runs in the exit callsite of a CUDA API call, where CUPTI's documentation
// (cupti_activity.h, cuptiFinalize) asks for cuptiFinalize; elsewhere it
// races with other threads inside CUPTI (Kineto saw crashes, kineto#686).
// Our subscription goes first, as Kineto does it (kineto#739).
void FinalizeInCallback() {
  State& s = S();
  int expected = kFinalizeRequested;
  if (!s.finalize_state.compare_exchange_strong(expected, kFinalizing)) return;
  s.api->Unsubscribe(s.subscriber);
  s.finalize_result = s.api->Finalize();
  s.finalize_state = kFinalized;
}

bool FinalizeCupti(std::string* why_not) {
  State& s = S();
  const CuptiApi& api = *s.api;
  const char* setting = getenv("GPUOS_CUPTI_FINALIZE");
  if (setting != nullptr && std::string(setting) == "0") {
    *why_not = "GPUOS_CUPTI_FINALIZE=0";
    return false;
  }
  if (api.Finalize == nullptr || api.EnableDomain == nullptr) {
    *why_not = "this CUPTI lacks cuptiFinalize";
    return false;
  }
  if (api.version < kMinCuptiVersionToFinalize) {
    *why_not = "CUPTI " + std::to_string(api.version) +
               " predates CUDA 12.6, before which cuptiFinalize could crash CUDA graphs";
    return false;
  }
  // Seen on an H100 with CUDA 13.0's CUPTI (2026-11-25): a torch.compile
  // (CUDA graphs) job attached, detached with cuptiFinalize, and its next
  // step failed with "unspecified launch failure"; PyTorch keeps CUPTI when
  // graphs are in use for the same reason (pytorch/pytorch#112507).
  if (s.graphs_launched.load()) {
    *why_not = "the job launches CUDA graphs, which cuptiFinalize can break";
    return false;
  }
  const Driver driver = ProcessDriver();
  if (!CudaInitialized(driver)) {
    *why_not = "CUDA was never initialized";
    return false;
  }
  // Every API call of every thread now reaches OnCuptiCallback, until one
  // of them has finalized: our own call below, normally.
  if (!CuptiOk("cuptiEnableDomain(RUNTIME_API)",
               api.EnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API)) ||
      !CuptiOk("cuptiEnableDomain(DRIVER_API)",
               api.EnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API))) {
    api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    *why_not = "cuptiEnableDomain failed";
    return false;
  }
  s.finalize_state = kFinalizeRequested;
  const Clock::time_point deadline = Clock::now() + kFinalizeTimeout;
  Clock::time_point next_call = Clock::now();
  while (s.finalize_state.load() != kFinalized && Clock::now() < deadline) {
    if (s.finalize_state.load() == kFinalizeRequested && Clock::now() >= next_call) {
      CUcontext context = nullptr;
      driver.CtxGetCurrent(&context);
      next_call = Clock::now() + std::chrono::milliseconds(100);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (s.finalize_state.load() != kFinalized) {
    int expected = kFinalizeRequested;
    if (s.finalize_state.compare_exchange_strong(expected, kNoFinalize)) {
      api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
      api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
      *why_not = "no CUDA API callback came to call cuptiFinalize in";
      return false;
    }
    // A callback is inside cuptiFinalize now; it unsubscribed us already.
    *why_not = "cuptiFinalize did not return within 5 s";
    return true;
  }
  s.finalize_state = kNoFinalize;
  if (s.finalize_result.load() != CUPTI_SUCCESS) {
    *why_not = "cuptiFinalize failed: " +
               CuptiResultName(&api, static_cast<CUptiResult>(s.finalize_result.load()));
  }
  return true;
}

}  // namespace gpuos_shim
