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
//   CUPTI_FLOOR_SYSTEM_TID=1          API records with the kernel's thread ids
//                                     (CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM),
//                                     as gpuos-trace's shim asks for
//   CUPTI_FLOOR_ZEROED=1              hand CUPTI buffers that are already zero
//                                     (fresh pages, cupti_bench_client.h) and say so
//                                     (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER),
//                                     so CUPTI does not zero them on the
//                                     application's thread
//   CUPTI_FLOOR_PREALLOC=N            device buffers allocated up front
//                                     (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE)
//   CUPTI_FLOOR_ENABLE_AT=context|delay:MS   enable the kinds when the first
//                                     context is created, or MS ms after start
// The kind "overhead" adds CUPTI's own overhead records
// (CUPTI_ACTIVITY_KIND_OVERHEAD); their count and time per overhead kind are
// printed at exit: where CUPTI spends its time, on which thread's clock.
// A kind list naming none of these ("none") enables nothing: what CUPTI
// costs by being loaded and subscribed.
// Two pseudo-kinds time API calls with CUPTI's Callback API instead of its
// RUNTIME/DRIVER activity records, as parcagpu and Proton do:
// "runtime-cb" and "driver-cb" enable the callbacks of every launch, copy,
// set, allocation, free and synchronize call of that domain; each call's
// entry and exit are stamped with CLOCK_MONOTONIC and a 24-byte record
// (correlation id, start, end) is written to a per-thread ring.
//   CUPTI_FLOOR_VERIFY=1              also keep every callback's and every
//                                     kernel record's correlation id, and
//                                     say at exit how many kernels matched
//                                     a timed call (not for timing runs)
// Built on the GPU machine by bench/build_cupti_floor.sh LIBRARY.
#include <cupti.h>
#include <cupti_runtime_cbid.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

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

// ---- CUPTI's own overhead records ("overhead") --------------------------

struct OverheadTotal {
  unsigned long long count = 0;
  unsigned long long total_ns = 0;
};
std::mutex g_overhead_mu;
OverheadTotal g_overhead[16];  // by CUpti_ActivityOverheadKind >> 16 (0: driver compiler/unknown)

const char* OverheadName(size_t index) {
  static const char* const kNames[] = {"unknown/driver-compiler", "cupti-buffer-flush",
                                       "cupti-instrumentation",   "cupti-resource",
                                       "runtime-module-loading",  "lazy-function-loading",
                                       "command-buffer-full",     "activity-buffer-request",
                                       "uvm-activity-init"};
  return index < sizeof(kNames) / sizeof(kNames[0]) ? kNames[index] : "other";
}

void CUPTIAPI CompletedOverhead(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                                size_t valid) {
  OverheadTotal local[16];
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_OVERHEAD) continue;
    const auto* overhead = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
    const size_t index = std::min<size_t>(uint32_t(overhead->overheadKind) >> 16, 15);
    ++local[index].count;
    local[index].total_ns += overhead->end > overhead->start ? overhead->end - overhead->start : 0;
  }
  {
    std::lock_guard<std::mutex> lock(g_overhead_mu);
    for (size_t i = 0; i < 16; ++i) {
      g_overhead[i].count += local[i].count;
      g_overhead[i].total_ns += local[i].total_ns;
    }
  }
  Completed(context, stream, buffer, size, valid);
}

// ---- API timing through callbacks ("runtime-cb", "driver-cb") ----------

struct TimedCall {
  uint32_t correlation_id;
  uint32_t cbid;
  uint64_t start_ns;
  uint64_t end_ns;
};

constexpr size_t kRingRecords = size_t{1} << 14;  // per thread, overwritten
std::atomic<unsigned long long> g_timed_calls{0};
bool g_verify = false;
std::mutex g_verify_mu;
std::unordered_set<uint32_t> g_callback_ids[2];  // [driver]
std::vector<uint32_t> g_kernel_ids;

struct ThreadRing {
  TimedCall* calls = new TimedCall[kRingRecords];
  size_t head = 0;
  uint64_t entered_ns[8] = {};  // per nesting depth (runtime -> driver)
  int depth = 0;
};
thread_local ThreadRing t_ring;

void CUPTIAPI OnApiCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  ThreadRing& ring = t_ring;
  if (call->callbackSite == CUPTI_API_ENTER) {
    if (ring.depth < 8) ring.entered_ns[ring.depth] = MonotonicNs();
    ++ring.depth;
    return;
  }
  const uint64_t end = MonotonicNs();
  --ring.depth;
  const uint64_t start = ring.depth >= 0 && ring.depth < 8 ? ring.entered_ns[ring.depth] : end;
  ring.calls[ring.head++ & (kRingRecords - 1)] = {call->correlationId, cbid, start, end};
  g_timed_calls.fetch_add(1, std::memory_order_relaxed);
  if (g_verify) {
    std::lock_guard<std::mutex> lock(g_verify_mu);
    g_callback_ids[domain == CUPTI_CB_DOMAIN_DRIVER_API].insert(call->correlationId);
  }
}

bool IsWorkCall(const char* name) {
  const std::string n = name;
  for (const char* skip : {"Get", "Set", "Query", "Node", "Occupancy", "Attribute"}) {
    if (n.find(skip) != std::string::npos) return false;
  }
  if (n.find("Graph") != std::string::npos && n.find("GraphLaunch") == std::string::npos) {
    return false;
  }
  for (const char* work : {"Launch", "Memcpy", "Memset", "Malloc", "Free", "Synchronize"}) {
    if (n.find(work) != std::string::npos) return true;
  }
  return false;
}

// Enables the callbacks of every work call of one API domain.
void EnableApiCallbacks(CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain) {
  int enabled = 0;
  for (uint32_t cbid = 1; cbid < 2048; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
    if (IsWorkCall(name) && cuptiEnableCallback(1, subscriber, domain, cbid) == CUPTI_SUCCESS) {
      ++enabled;
    }
  }
  if (getenv("CUPTI_FLOOR_VERBOSE") != nullptr) {
    fprintf(stderr, "cupti_floor: %d %s callbacks\n", enabled,
            domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver" : "runtime");
  }
}

// Keeps the kernels' correlation ids (CUPTI_FLOOR_VERIFY only).
void CUPTIAPI CompletedVerify(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                              size_t valid) {
  CUpti_Activity* record = nullptr;
  std::vector<uint32_t> ids;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      ids.push_back(reinterpret_cast<CUpti_ActivityKernel10*>(record)->correlationId);
    }
  }
  {
    std::lock_guard<std::mutex> lock(g_verify_mu);
    g_kernel_ids.insert(g_kernel_ids.end(), ids.begin(), ids.end());
  }
  Completed(context, stream, buffer, size, valid);
}

bool g_overhead_records = false;

void AtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (g_overhead_records) {
    std::lock_guard<std::mutex> lock(g_overhead_mu);
    for (size_t i = 0; i < 16; ++i) {
      if (g_overhead[i].count == 0) continue;
      fprintf(stderr, "cupti_floor overhead: %-24s %10llu records %12.3f ms\n", OverheadName(i),
              g_overhead[i].count, g_overhead[i].total_ns / 1e6);
    }
  }
  if (getenv("CUPTI_FLOOR_VERBOSE") != nullptr) {
    fprintf(stderr, "cupti_floor: %llu records, %llu calls timed by callbacks\n",
            g_records.load(), g_timed_calls.load());
  }
  if (g_verify) {
    std::lock_guard<std::mutex> lock(g_verify_mu);
    size_t runtime = 0, driver = 0, zero = 0;
    for (uint32_t id : g_kernel_ids) {
      zero += id == 0;
      runtime += g_callback_ids[0].count(id);
      driver += g_callback_ids[1].count(id);
    }
    fprintf(stderr,
            "cupti_floor verify: %zu kernels, %zu with correlation id 0, %zu match a runtime "
            "callback, %zu match a driver callback (%zu runtime, %zu driver ids)\n",
            g_kernel_ids.size(), zero, runtime, driver, g_callback_ids[0].size(),
            g_callback_ids[1].size());
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
               {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
               {"overhead", CUPTI_ACTIVITY_KIND_OVERHEAD}};
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
  const bool runtime_cb = Wanted(kinds, "runtime-cb");
  const bool driver_cb = Wanted(kinds, "driver-cb");
  if (runtime_cb || driver_cb) {
    CUpti_SubscriberHandle subscriber;
    if (cuptiSubscribe(&subscriber, OnApiCallback, nullptr) != CUPTI_SUCCESS) {
      fprintf(stderr, "cupti_floor: could not subscribe for API callbacks\n");
      return;
    }
    if (runtime_cb) EnableApiCallbacks(subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (driver_cb) EnableApiCallbacks(subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
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
  if (getenv("CUPTI_FLOOR_SYSTEM_TID") != nullptr) {
    cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  }
  SetAttribute<size_t>("CUPTI_FLOOR_PREALLOC", CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE);
  const bool zeroed = getenv("CUPTI_FLOOR_ZEROED") != nullptr;
  if (zeroed) {
    uint8_t one = 1;
    size_t size = sizeof(one);
    if (cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &one) !=
        CUPTI_SUCCESS) {
      fprintf(stderr, "cupti_floor: could not set CUPTI_FLOOR_ZEROED\n");
    }
  }
  g_verify = getenv("CUPTI_FLOOR_VERIFY") != nullptr;
  const char* kinds = getenv("CUPTI_FLOOR_KINDS");
  g_overhead_records = kinds != nullptr && Wanted(kinds, "overhead");
  CUpti_BuffersCallbackCompleteFunc completed = Completed;
  if (g_verify) completed = CompletedVerify;
  if (g_overhead_records) completed = CompletedOverhead;
  cupti_bench::g_fresh_page_buffers = zeroed;
  if (cuptiActivityRegisterCallbacks(Requested, completed) != CUPTI_SUCCESS) {
    return 0;
  }
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
