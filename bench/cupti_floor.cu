// What CUPTI's activity API alone costs a raw CUDA launch loop: the floor
// under any CUPTI-based tracer, gpuos-trace's shim included.  A minimal
// client in the program itself: subscribes, enables the given activity
// kinds, hands CUPTI 8 MiB buffers and only counts the records it gets
// back (no parsing beyond walking them, no transport).  Prints one JSON
// line like bench/cuda_launch_rate.cu, so bench/gpu_overhead_breakdown.sh
// can run it side by side with gpuos-trace.
//   cupti_floor [N] [none|kernel|kernel,runtime|all]
#include <cuda_runtime.h>
#include <cupti.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

__global__ void empty_kernel() {}

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
std::atomic<unsigned long long> g_records{0};

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(64, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  unsigned long long n = 0;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++n;
  g_records += n;
  free(buffer);
}

bool Enable(CUpti_ActivityKind kind) { return cuptiActivityEnable(kind) == CUPTI_SUCCESS; }

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 200000;
  const std::string kinds = argc > 2 ? argv[2] : "kernel";
  if (kinds != "none") {
    if (cuptiActivityRegisterCallbacks(Requested, Completed) != CUPTI_SUCCESS) return 2;
    bool ok = Enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (kinds != "kernel") ok = ok && Enable(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (kinds == "all") {
      ok = ok && Enable(CUPTI_ACTIVITY_KIND_DRIVER) && Enable(CUPTI_ACTIVITY_KIND_MEMCPY) &&
           Enable(CUPTI_ACTIVITY_KIND_MEMSET) && Enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    }
    if (!ok) {
      fprintf(stderr, "cupti_floor: could not enable CUPTI activity\n");
      return 2;
    }
  }
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 1>>>();
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) empty_kernel<<<1, 1>>>();
  cudaError_t err = cudaDeviceSynchronize();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (err != cudaSuccess) return 1;
  if (kinds != "none") cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  printf("{\"mode\": \"cupti_floor\", \"kinds\": \"%s\", \"records\": %llu, \"rate\": %.1f, "
         "\"unit\": \"launches/s\"}\n",
         kinds.c_str(), g_records.load(), n / s);
  return 0;
}
