// The CPU time of one kernel launch call, for telling a tracer's CPU-side
// cost per launch from its GPU-side cost (bench/gpu_overhead_breakdown.sh,
// workload launch_cpu).  Empty kernels are launched in batches small enough
// that the launch queue never fills (in the back-to-back loop of
// cuda_launch_rate.cu it may, and then the GPU sets the pace);
// each batch's launch calls are timed on the host clock, then the stream is
// drained untimed.  So "cpu_ns_per_launch" is what the launching thread
// pays per call and nothing else: CUPTI's per-launch instrumentation shows
// up here, its GPU-side timestamps do not.  Each batch follows a short
// reading of the CPU's pace (bench/cpu_pace.h), and "paced_step" is the
// median batch's time per launch in units of that pace (single processes
// scatter by more than the cost measured).  Prints one JSON line.
//   cuda_launch_cpu_cost [LAUNCHES_PER_BATCH] [BATCHES]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cpu_pace.h"
#include "cuda_check.h"

__global__ void EmptyKernel() {}

namespace {
constexpr uint64_t kPaceIterations = 200000;  // about 0.2 ms, as long as a batch
}  // namespace

int main(int argc, char** argv) {
  const int per_batch = argc > 1 ? atoi(argv[1]) : 64;
  const int batches = argc > 2 ? atoi(argv[2]) : 3000;
  if (per_batch <= 0 || batches <= 0) {
    fprintf(stderr, "usage: cuda_launch_cpu_cost [LAUNCHES_PER_BATCH] [BATCHES]\n");
    return 2;
  }
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < 1000; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK(cudaStreamSynchronize(stream));

  using Clock = std::chrono::steady_clock;
  std::vector<double> batch_ns, paced, paces;
  batch_ns.reserve(batches);
  for (int b = 0; b < batches; ++b) {
    const double pace = PaceSeconds(kPaceIterations);
    const auto start = Clock::now();
    for (int i = 0; i < per_batch; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
    const auto end = Clock::now();
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream));
    batch_ns.push_back(std::chrono::duration<double, std::nano>(end - start).count());
    paced.push_back(batch_ns.back() / 1e9 / per_batch / pace);
    paces.push_back(pace);
  }
  // The median batch: a batch that met a buffer flush or a preemption
  // says little about the per-call cost.  The mean is printed too, since
  // a tracer's occasional stalls are part of what the job pays.
  double total = 0;
  for (double ns : batch_ns) total += ns;
  const double median_ns = Median(batch_ns) / per_batch;
  const double mean_ns = total / batches / per_batch;
  printf("{\"mode\": \"launch_cpu\", \"profiler\": false, \"rate\": %.1f, "
         "\"cpu_ns_per_launch\": %.1f, \"mean_cpu_ns_per_launch\": %.1f, "
         "\"paced_step\": %.6f, \"pace_ms\": %.4f, \"unit\": \"launch calls/s (CPU time)\"}\n",
         1e9 / median_ns, median_ns, mean_ns, Median(paced), Median(paces) * 1e3);
  return 0;
}
