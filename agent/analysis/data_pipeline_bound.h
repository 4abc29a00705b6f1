// What held the data pipeline back while the GPU waited for data: the CPU
// (preprocessing, in the data workers or in the loop's own thread), the
// disk, or a CPU to run on (the workers runnable but not running).  It
// decides the advice: more DataLoader workers help a pipeline bound by its
// own CPU work on a host with cores to spare, not one waiting on storage or
// on CPUs that are already taken.
//
// From the step's GPU-idle time of the data-wait causes: the loop's own
// loading (IdleCause::kDataWaitRunning) and disk reads (kDiskRead), and,
// for the waits on the workers, what the threads at the ends of their
// wakeup chains were doing meanwhile (WaitVia::states, wakeup_chain.h).
#pragma once

#include <cstdint>

#include "analysis/step_analysis.h"

namespace gpuos {

enum class DataPipelineLimit : uint8_t {
  kUnknown,     // too little of the wait explained, or no part dominates
  kCpu,         // preprocessing on a CPU
  kDisk,        // waiting for block I/O
  kCpuWait,     // runnable, waiting for a CPU (run queue, preempted)
  kOtherIo,     // blocked in other syscalls: not local block I/O
};

// A part dominates at this share of the explained wait.
inline constexpr double kDataLimitShare = 0.40;
// Below this share of the data-wait idle explained, the limit is unknown.
inline constexpr double kDataLimitMinExplained = 0.25;

struct DataPipelineBound {
  uint64_t data_idle_ns = 0;  // GPU idle in the data-wait causes
  uint64_t cpu_ns = 0;        // of it: the workers on a CPU, or the loop loading data itself
  uint64_t disk_ns = 0;       // the workers' or the loop's own block I/O
  uint64_t cpu_wait_ns = 0;   // the workers in the run queue or preempted
  uint64_t other_io_ns = 0;   // the workers blocked in other syscalls
  uint64_t other_ns = 0;      // futex, page faults, mmap/munmap, unknown
  uint64_t explained_ns() const { return cpu_ns + disk_ns + cpu_wait_ns + other_io_ns + other_ns; }
  // At least kDataLimitMinExplained of the data-wait idle explained.
  bool Explained() const;
  double Share(uint64_t part) const;  // of explained_ns()
  DataPipelineLimit Limit() const;
};

// Over the measured steps; where `without_restart_steps`, not the steps
// that started DataLoader workers again (worker_restarts.h: a new worker
// importing torch is that finding's, not the pipeline's steady state).
DataPipelineBound FindDataPipelineBound(const StepAnalysis& analysis, bool without_restart_steps = false);

}  // namespace gpuos
