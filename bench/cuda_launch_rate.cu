// Raw CUDA launch rate of an empty kernel, for gpuos-trace's overhead
// benchmark (bench/run_gpu_overhead.sh): launches/s of N back-to-back
// launches after a warm-up, printed as one JSON line.  Besides the overall
// rate ("rate": launches over the time until the GPU is done) it prints
// where the time went, to tell a tracer's CPU-side cost from its GPU-side
// cost: "enqueue_rate" (launches over the time the launch calls took) and
// "gpu_rate" (launches over the GPU's own time between an event recorded
// before each chunk's first launch and one after its last, summed).
// When the GPU is the bottleneck the overall and GPU rates agree; when the
// CPU is, the enqueue and overall rates agree.  The launches run in chunks,
// each after a reading of the CPU's pace (bench/cpu_pace.h): "paced_step"
// is the median chunk's time per launch in units of that pace.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "cpu_pace.h"
#include "cuda_check.h"

__global__ void empty_kernel() {}

namespace {
constexpr int kChunks = 20;
constexpr uint64_t kPaceIterations = 2000000;  // about 2 ms
}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200000;
  if (n < kChunks) {
    fprintf(stderr, "usage: cuda_launch_rate [LAUNCHES >= %d]\n", kChunks);
    return 2;
  }
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 1>>>();
  cudaEvent_t gpu_start[kChunks], gpu_end[kChunks];
  CUDA_CHECK(cudaDeviceSynchronize());
  for (int c = 0; c < kChunks; ++c) {
    CUDA_CHECK(cudaEventCreate(&gpu_start[c]));
    CUDA_CHECK(cudaEventCreate(&gpu_end[c]));
  }
  // CUDA_LAUNCH_RATE_SETTLE_MS: a pause before the timed loop (for a CUPTI
  // client that starts recording a while after CUDA is up).
  if (const char* settle = getenv("CUDA_LAUNCH_RATE_SETTLE_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(atoi(settle)));
  }
  using Clock = std::chrono::steady_clock;
  const int per_chunk = n / kChunks;
  std::vector<double> paced, paces;
  double enqueue_s = 0;
  for (int c = 0; c < kChunks; ++c) {
    const double pace = PaceSeconds(kPaceIterations);
    const auto chunk_start = Clock::now();
    cudaEventRecord(gpu_start[c]);
    for (int i = 0; i < per_chunk; ++i) empty_kernel<<<1, 1>>>();
    cudaEventRecord(gpu_end[c]);
    const double chunk_s = std::chrono::duration<double>(Clock::now() - chunk_start).count();
    enqueue_s += chunk_s;
    paced.push_back(chunk_s / per_chunk / pace);
    paces.push_back(pace);
  }
  const auto sync_start = Clock::now();
  CUDA_CHECK(cudaDeviceSynchronize());
  const double s = enqueue_s + std::chrono::duration<double>(Clock::now() - sync_start).count();
  float gpu_ms = 0;
  for (int c = 0; c < kChunks; ++c) {
    float chunk_ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&chunk_ms, gpu_start[c], gpu_end[c]));
    gpu_ms += chunk_ms;
  }
  const int launched = per_chunk * kChunks;
  printf("{\"mode\": \"raw_launch\", \"profiler\": false, \"rate\": %.1f, \"enqueue_rate\": %.1f, "
         "\"gpu_rate\": %.1f, \"paced_step\": %.6f, \"pace_ms\": %.3f, \"unit\": \"launches/s\"}\n",
         launched / s, launched / enqueue_s, gpu_ms > 0 ? launched / (gpu_ms / 1e3) : 0.0,
         Median(paced), Median(paces) * 1e3);
  return 0;
}
