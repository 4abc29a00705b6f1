// What the traced job already does about the usual bottlenecks -- CUDA graph
// replay, pinned and asynchronous host-to-device copies, the host's CPU
// count its data workers are judged against -- so that the diagnosis does
// not recommend a lever the job has already pulled (diagnosis.h).  Counted
// over the measured steps of the launching thread's process, in the same
// pass that collects the steps.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/step_finder.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

struct JobPractices {
  // CUDA API calls of the process starting in a measured step.
  uint64_t graph_launches = 0;   // cudaGraphLaunch / cuGraphLaunch
  uint64_t kernel_launches = 0;  // every other launch call (cudaLaunchKernel, cuLaunchKernel...)
  // Kernels of the process starting in a measured step; graph_kernels ran
  // as nodes of a CUDA graph (GpuKernel.graph_id != 0).
  uint64_t kernels = 0;
  uint64_t graph_kernels = 0;
  // Host-to-device copies starting in a measured step: from pinned memory,
  // and issued with an async API (non_blocking=True).
  uint64_t htod_copies = 0;
  uint64_t htod_pinned = 0;
  uint64_t htod_async = 0;
  // The host's online CPUs from the trace header; 0 when not recorded.
  uint32_t online_cpus = 0;

  // At least one graph replay a measured step, or most kernels from graphs.
  bool GraphsInUse(uint64_t measured_steps) const;
  // Most host-to-device copies are pinned / async.
  bool CopiesPinned() const { return htod_copies > 0 && 2 * htod_pinned >= htod_copies; }
  bool CopiesAsync() const { return htod_copies > 0 && 2 * htod_async >= htod_copies; }
};

// Fed the trace's events (any order) after the step plan is known.
class JobPracticeTally {
 public:
  JobPracticeTally(const StepPlan& plan, const v1::TraceHeader& header);
  void Add(const v1::Event& event);
  const JobPractices& practices() const { return practices_; }

 private:
  bool InMeasuredStep(uint64_t ts) const;

  uint32_t pid_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> windows_;  // measured steps, sorted by start
  JobPractices practices_;
};

}  // namespace gpuos
