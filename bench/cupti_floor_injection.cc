// What CUPTI's activity API alone costs a CUDA program: the floor under
// any tracer that records each kernel through CUPTI, gpuos-trace's shim
// included.  A minimal CUPTI client loaded by the CUDA driver itself
// (CUDA_INJECTION64_PATH=libcupti_floor.so), so it works for any program,
// Python included: it enables the activity kinds in $CUPTI_FLOOR_KINDS
// (default "kernel,runtime": each kernel and its launch call), hands CUPTI
// 8 MiB buffers and only walks the records it gets back: no parsing, no
// clock callback, no transport.  bench/run_gpu_overhead.sh runs the same
// workloads under it, side by side with gpuos-trace and torch.profiler.
// Built on the GPU machine:
//   g++ -O2 -shared -fPIC -o libcupti_floor.so bench/cupti_floor_injection.cc \
//       -I$CUDA/extras/CUPTI/include -I$CUDA/include -L$CUDA/lib64 -lcupti
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
std::atomic<unsigned long long> g_records{0};

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(64, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  unsigned long long n = 0;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++n;
  g_records += n;
  free(buffer);
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

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const char* env = getenv("CUPTI_FLOOR_KINDS");
  const std::string kinds = env != nullptr && *env != '\0' ? env : "kernel,runtime";
  if (cuptiActivityRegisterCallbacks(Requested, Completed) != CUPTI_SUCCESS) return 0;
  const struct {
    const char* name;
    CUpti_ActivityKind kind;
  } table[] = {{"kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
               {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
               {"driver", CUPTI_ACTIVITY_KIND_DRIVER},
               {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},
               {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
               {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}};
  for (const auto& entry : table) {
    if (Wanted(kinds, entry.name) && cuptiActivityEnable(entry.kind) != CUPTI_SUCCESS) {
      fprintf(stderr, "cupti_floor: could not enable %s records\n", entry.name);
    }
  }
  atexit(AtExit);
  return 1;
}
