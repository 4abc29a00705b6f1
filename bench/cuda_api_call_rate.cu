// The CPU cost of a traced CUDA API call that gives the GPU no work, for
// gpuos-trace's overhead benchmarks (bench/gpu_overhead_breakdown.sh,
// workload api_calls): calls/s of N back-to-back cudaStreamSynchronize
// calls on an idle stream, after a warm-up, as one JSON line.  The launch
// loop (cuda_launch_rate.cu) cannot tell a tracer's per-call CPU cost from
// its per-kernel cost, because its launch queue fills; this loop has only
// the per-call cost (one runtime call and the driver call under it, both
// traced by gpuos-trace).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000000;
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    fprintf(stderr, "cuda_api_call_rate: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  for (int i = 0; i < 10000; ++i) cudaStreamSynchronize(stream);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < n && err == cudaSuccess; ++i) err = cudaStreamSynchronize(stream);
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (err != cudaSuccess) {
    fprintf(stderr, "cuda_api_call_rate: %s\n", cudaGetErrorString(err));
    return 1;
  }
  printf("{\"mode\": \"api_calls\", \"profiler\": false, \"rate\": %.1f, \"ns_per_call\": %.1f, "
         "\"unit\": \"calls/s\"}\n",
         n / s, s * 1e9 / n);
  return 0;
}
