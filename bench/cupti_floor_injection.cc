// What CUPTI's activity API alone costs a CUDA program: the floor under
// any tracer that records each kernel through CUPTI, gpuos-trace's shim
// included.  A minimal CUPTI client loaded by the CUDA driver itself
// (CUDA_INJECTION64_PATH=libcupti_floor.so), so it works for any program,
// Python included: it enables the activity kinds in $CUPTI_FLOOR_KINDS
// (default "kernel,runtime": each kernel and its launch call), hands CUPTI
// 8 MiB buffers and only walks the records it gets back: no parsing, no
// clock callback, no transport.  bench/run_gpu_overhead.sh runs the same
// workloads under it, side by side with gpuos-trace and torch.profiler.
// Knobs, to find what CUPTI's own cost depends on (all off by default):
//   CUPTI_FLOOR_CLOCK=monotonic       a CLOCK_MONOTONIC timestamp callback,
//                                     as gpuos-trace's shim registers
//   CUPTI_FLOOR_PINNED=1              GPU timestamps in pinned host memory
//                                     (CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED)
//   CUPTI_FLOOR_DEVICE_BUFFER=BYTES   CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE
//   CUPTI_FLOOR_PER_THREAD=0|1        CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER
//   CUPTI_FLOOR_ENABLE_AT=context|delay:MS   enable the kinds when the first
//                                     context is created, or MS ms after start
// Built on the GPU machine:
//   g++ -O2 -shared -fPIC -o libcupti_floor.so bench/cupti_floor_injection.cc \
//       -I$CUDA/extras/CUPTI/include -I$CUDA/include -L$CUDA/lib64 -lcupti
#include <cupti.h>
#include <cupti_runtime_cbid.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>

#include "cupti_bench_client.h"

namespace {

using cupti_bench::Completed;
using cupti_bench::g_records;
using cupti_bench::MonotonicNs;
using cupti_bench::Requested;

template <typename T>
void SetAttribute(const char* env, CUpti_ActivityAttribute attribute) {
  const char* value = getenv(env);
  if (value == nullptr || *value == '\0') return;
  T v = static_cast<T>(strtoull(value, nullptr, 0));
  size_t size = sizeof(v);
  if (cuptiActivitySetAttribute(attribute, &size, &v) != CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_floor: could not set %s\n", env);
  }
}

bool Wanted(const std::string& kinds, const char* kind) {
  return ("," + kinds + ",").find(std::string(",") + kind + ",") != std::string::npos;
}

void AtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (getenv("CUPTI_FLOOR_VERBOSE") != nullptr) {
    fprintf(stderr, "cupti_floor: %llu records\n", g_records.load());
  }
}

// Enables the kinds named in $CUPTI_FLOOR_KINDS.
void EnableKinds() {
  const char* env = getenv("CUPTI_FLOOR_KINDS");
  const std::string kinds = env != nullptr && *env != '\0' ? env : "kernel,runtime";
  const struct {
    const char* name;
    CUpti_ActivityKind kind;
  } table[] = {{"kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
               {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
               {"driver", CUPTI_ACTIVITY_KIND_DRIVER},
               {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},
               {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
               {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}};
  // "runtime-launch": runtime-API records of cudaLaunchKernel only (the
  // per-call switch), to tell the cost of recording calls from the cost of
  // CUPTI's hooks on every runtime call.
  if (Wanted(kinds, "runtime-launch") &&
      cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1) !=
          CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_floor: could not enable cudaLaunchKernel records\n");
  }
  for (const auto& entry : table) {
    if (Wanted(kinds, entry.name) && cuptiActivityEnable(entry.kind) != CUPTI_SUCCESS) {
      fprintf(stderr, "cupti_floor: could not enable %s records\n", entry.name);
    }
  }
}

void CUPTIAPI OnContextCreated(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {
  static std::once_flag once;
  std::call_once(once, EnableKinds);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const char* clock = getenv("CUPTI_FLOOR_CLOCK");
  if (clock != nullptr && strcmp(clock, "monotonic") == 0) {
    cuptiActivityRegisterTimestampCallback(MonotonicNs);
  }
  SetAttribute<uint8_t>("CUPTI_FLOOR_PINNED", CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED);
  SetAttribute<size_t>("CUPTI_FLOOR_DEVICE_BUFFER", CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE);
  SetAttribute<uint8_t>("CUPTI_FLOOR_PER_THREAD", CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER);
  if (cuptiActivityRegisterCallbacks(Requested, Completed) != CUPTI_SUCCESS) return 0;
  // When to enable the kinds: at once (default), when the first context is
  // created ("context"), or N ms later from another thread ("delay:N"), as
  // a profiler that starts in a running job does.
  const char* at = getenv("CUPTI_FLOOR_ENABLE_AT");
  const std::string when = at != nullptr ? at : "";
  if (when == "context") {
    CUpti_SubscriberHandle subscriber;
    if (cuptiSubscribe(&subscriber, OnContextCreated, nullptr) != CUPTI_SUCCESS ||
        cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_CONTEXT_CREATED) != CUPTI_SUCCESS) {
      fprintf(stderr, "cupti_floor: could not subscribe to context creation\n");
    }
  } else if (when.rfind("delay:", 0) == 0) {
    const int ms = atoi(when.c_str() + 6);
    std::thread([ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      EnableKinds();
    }).detach();
  } else {
    EnableKinds();
  }
  atexit(AtExit);
  return 1;
}
