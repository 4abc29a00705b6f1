// Raw CUDA launch rate of an empty kernel, for gpuos-trace's overhead
// benchmark (bench/run_gpu_overhead.sh): launches/s of N back-to-back
// launches after a warm-up, printed as one JSON line.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200000;
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 1>>>();
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "cuda_launch_rate: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) empty_kernel<<<1, 1>>>();
  cudaError_t err = cudaDeviceSynchronize();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (err != cudaSuccess) {
    fprintf(stderr, "cuda_launch_rate: %s\n", cudaGetErrorString(err));
    return 1;
  }
  printf("{\"mode\": \"raw_launch\", \"profiler\": false, \"rate\": %.1f, \"unit\": \"launches/s\"}\n", n / s);
  return 0;
}
