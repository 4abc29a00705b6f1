// Raw CUDA launch rate of an empty kernel, for gpuos-trace's overhead
// benchmark (bench/run_gpu_overhead.sh): launches/s of N back-to-back
// launches after a warm-up, printed as one JSON line.  Besides the overall
// rate ("rate": launches over the time until the GPU is done) it prints
// where the time went, to tell a tracer's CPU-side cost from its GPU-side
// cost: "enqueue_rate" (launches over the time until the last launch call
// returned) and "gpu_rate" (launches over the GPU's own time between an
// event recorded before the first launch and one after the last).  When
// the GPU is the bottleneck the three agree; when the CPU is, the enqueue
// and overall rates agree and the GPU rate is higher.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200000;
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 1>>>();
  cudaEvent_t gpu_start, gpu_end;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaEventCreate(&gpu_start) != cudaSuccess ||
      cudaEventCreate(&gpu_end) != cudaSuccess) {
    fprintf(stderr, "cuda_launch_rate: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  // CUDA_LAUNCH_RATE_SETTLE_MS: a pause before the timed loop (for a CUPTI
  // client that starts recording a while after CUDA is up).
  if (const char* settle = getenv("CUDA_LAUNCH_RATE_SETTLE_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(atoi(settle)));
  }
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  cudaEventRecord(gpu_start);
  for (int i = 0; i < n; ++i) empty_kernel<<<1, 1>>>();
  cudaEventRecord(gpu_end);
  auto enqueued = Clock::now();
  cudaError_t err = cudaDeviceSynchronize();
  auto done = Clock::now();
  float gpu_ms = 0;
  if (err == cudaSuccess) err = cudaEventElapsedTime(&gpu_ms, gpu_start, gpu_end);
  if (err != cudaSuccess) {
    fprintf(stderr, "cuda_launch_rate: %s\n", cudaGetErrorString(err));
    return 1;
  }
  double s = std::chrono::duration<double>(done - start).count();
  double enqueue_s = std::chrono::duration<double>(enqueued - start).count();
  printf("{\"mode\": \"raw_launch\", \"profiler\": false, \"rate\": %.1f, \"enqueue_rate\": %.1f, "
         "\"gpu_rate\": %.1f, \"unit\": \"launches/s\"}\n",
         n / s, n / enqueue_s, gpu_ms > 0 ? n / (gpu_ms / 1e3) : 0.0);
  return 0;
}
