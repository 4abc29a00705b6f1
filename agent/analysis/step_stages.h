// The stage view of a step, the table users build by hand ("data loading /
// CPU->GPU transfer / kernel dispatch / GPU compute / OS overhead / other",
// in percent of the step), with communication for distributed jobs.  The
// stages partition the step's wall time, each instant going to exactly one
// stage:
//   GPU compute   a compute kernel (any but a collective's) of the traced
//                 process runs on the GPU, or a memset and no collective;
//   communication else a collective's kernel (NCCL) runs: the GPU exchanges
//                 data with the other ranks, or waits inside the collective
//                 for the slowest of them -- not compute, and not idle;
//   transfer      else a memcpy runs on the GPU, or the launching thread is
//                 in a cudaMemcpy*/cuMemcpy* call;
//   and the rest, when the GPU does none of these, by the GPU-idle cause
//   (gpu_idle_attribution.h):
//   data loading  waiting for data (futex, blocked or running), in a data
//                 fetch or woken by a data worker or the pin-memory thread,
//                 or blocked on the thread's own reads from storage;
//   dispatch      in a kernel launch call, or waiting for the autograd
//                 thread's backward pass;
//   OS overhead   what the kernel itself cost: munmap, mmap, page faults,
//                 preempted / run queue, blocking syscalls no thread of the
//                 job ended (the thread's own storage writes among them);
//   other         synchronizing, other CUDA API calls, other CPU work,
//                 waiting for a CUDA thread or the job's other threads, and
//                 futex waits no traced thread ended.
// So every stage but GPU compute is *exposed* time: work that a busy GPU
// would have hidden is not counted against it (communication that overlaps
// compute kernels, as DDP's gradient all-reduce overlaps the backward pass,
// is GPU compute).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "analysis/gpu_idle_attribution.h"

namespace gpuos {

enum class Stage : uint8_t {
  kDataLoading = 0,
  kTransfer,
  kDispatch,
  kGpuCompute,
  kCommunication,
  kOsOverhead,
  kOther,
  kCount,
};

inline constexpr size_t kStageCount = static_cast<size_t>(Stage::kCount);
using StageTimes = std::array<uint64_t, kStageCount>;

// The stage of an instant when no kernel, memset or memcpy runs.
Stage StageOfIdleCause(IdleCause cause);

const char* StageName(Stage stage);  // "data loading"
const char* StageKey(Stage stage);   // "data_loading"

// Mean, median and 95th percentile of a per-step quantity (a share of the
// step, or a duration).  Percentiles interpolate linearly between the two
// nearest ranks (numpy's default), so p50 of {1, 2} is 1.5.
struct DistributionStats {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p95 = 0;
  double min = 0;
  double max = 0;
};
DistributionStats Distribution(std::vector<double> values);

}  // namespace gpuos
