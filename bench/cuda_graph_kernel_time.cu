// The GPU time of tiny kernels, for telling a tracer's GPU-side cost from
// its CPU-side cost (bench/gpu_overhead_breakdown.sh, workload
// graph_kernels): one CUDA graph of N empty kernels is replayed M times and
// timed with CUDA events, so the GPU runs the kernels back to back whatever
// the CPU does.  If per-kernel activity records (CUPTI's timestamps around
// each kernel) lengthen each kernel on the GPU, kernels/s falls here; if
// their cost is on the CPU only, it does not.  Prints one JSON line.
//   cuda_graph_kernel_time [KERNELS_PER_GRAPH] [REPLAYS]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_check.h"

__global__ void EmptyKernel() {}

int main(int argc, char** argv) {
  const int kernels = argc > 1 ? atoi(argv[1]) : 1000;
  const int replays = argc > 2 ? atoi(argv[2]) : 200;
  if (kernels <= 0 || replays <= 0) {
    fprintf(stderr, "usage: cuda_graph_kernel_time [KERNELS_PER_GRAPH] [REPLAYS]\n");
    return 2;
  }
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kernels; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 20; ++i) CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < replays; ++i) CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaEventRecord(stop, stream));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  const double total = static_cast<double>(kernels) * replays;
  printf("{\"mode\": \"graph_kernels\", \"profiler\": false, \"rate\": %.1f, "
         "\"gpu_ns_per_kernel\": %.1f, \"unit\": \"kernels/s (GPU time)\"}\n",
         total / (ms / 1e3), ms * 1e6 / total);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return 0;
}
