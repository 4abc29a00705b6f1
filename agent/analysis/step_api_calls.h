// The launching thread's CUDA calls in one step, in call order, and what
// their sequence says beyond each call's own time: the stretches away from
// CUDA calls that end in a copy to the device (the job's own CPU work,
// gpu_idle_attribution.h), the syncs between launches
// (ApiCounts::syncs_between_launches, step_breakdown.h) and the allocation
// calls, each counted once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/cuda_api_class.h"

namespace gpuos {

struct StepApiCall {
  uint64_t from;  // clipped to the step
  uint64_t to;
  uint8_t bits;   // kApiCopiesToDevice, kApiNextCopiesToDevice (step_timeline.h)
  CudaApiClass api_class;
  bool starts_in_step = true;  // false: began before the step (`from` is clipped)
};

class StepApiCalls {
 public:
  void Add(const StepApiCall& call) { calls_.push_back(call); }

  // The stretches of more than kHostWorkGapNs between the calls (and the
  // step's edges) that end in a copy to the device: the CPU made data for
  // the GPU.  None in a step without recorded calls (kernel-only records, a
  // step outside a capture window): there the trace cannot tell framework
  // code from the job's own work.
  std::vector<std::pair<uint64_t, uint64_t>> AwayFromCuda(uint64_t step_start, uint64_t step_end);

  // Syncs with a launch since the previous sync and another after them; a
  // sync nested in another (the runtime's around the driver's) is one.
  uint64_t SyncsBetweenLaunches();

  // Allocation calls (CudaApiClass::kAllocate) that start in the step; one
  // nested in another (the driver's inside the runtime's) is one.
  uint64_t Allocations();

 private:
  void Sort();

  std::vector<StepApiCall> calls_;
  bool sorted_ = false;
};

}  // namespace gpuos
