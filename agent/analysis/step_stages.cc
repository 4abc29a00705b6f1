// Stage names, the idle-cause -> stage map and distribution statistics; see
// step_stages.h.
#include "analysis/step_stages.h"

#include <algorithm>
#include <cmath>

namespace gpuos {

Stage StageOfIdleCause(IdleCause cause) {
  switch (cause) {
    case IdleCause::kPageableMemcpy:
    case IdleCause::kCopyOther: return Stage::kTransfer;
    case IdleCause::kLaunching:
    case IdleCause::kWaitBackward: return Stage::kDispatch;
    case IdleCause::kDataWaitFutex:
    case IdleCause::kDataWaitBlocked:
    case IdleCause::kDataWaitRunning:
    case IdleCause::kDiskRead:
    // What the job's other processes make for each step (an RL job's
    // environment steps) is its input, as a DataLoader's batches are.
    case IdleCause::kWaitWorkerProcesses: return Stage::kDataLoading;
    case IdleCause::kMunmap:
    case IdleCause::kMmap:
    case IdleCause::kPageFaults:
    // Writes from the driving thread (a checkpoint, logs) are not input;
    // they stay where a blocking syscall of the OS goes.
    case IdleCause::kDiskWrite:
    case IdleCause::kPreemptedRunqueue:
    case IdleCause::kOtherSyscalls: return Stage::kOsOverhead;
    // A wait on a futex is a wait on some thread, not the kernel's cost;
    // with no traced waker to charge, it is "other".
    case IdleCause::kFutexOther:
    case IdleCause::kWaitGpuSync:
    case IdleCause::kWaitJobThreads:
    case IdleCause::kSynchronizing:
    case IdleCause::kOtherCudaApi:
    case IdleCause::kAllocating:
    case IdleCause::kHostWork:
    case IdleCause::kOtherCpu:
    case IdleCause::kCount: break;
  }
  return Stage::kOther;
}

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kDataLoading: return "data loading";
    case Stage::kTransfer: return "CPU<->GPU transfer";
    case Stage::kDispatch: return "kernel dispatch";
    case Stage::kGpuCompute: return "GPU compute";
    case Stage::kCommunication: return "communication";
    case Stage::kOsOverhead: return "OS overhead";
    case Stage::kOther: return "other";
    case Stage::kCount: break;
  }
  return "unknown";
}

const char* StageKey(Stage stage) {
  switch (stage) {
    case Stage::kDataLoading: return "data_loading";
    case Stage::kTransfer: return "transfer";
    case Stage::kDispatch: return "dispatch";
    case Stage::kGpuCompute: return "gpu_compute";
    case Stage::kCommunication: return "communication";
    case Stage::kOsOverhead: return "os_overhead";
    case Stage::kOther: return "other";
    case Stage::kCount: break;
  }
  return "unknown";
}

namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  double pos = q * (sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

}  // namespace

DistributionStats Distribution(std::vector<double> values) {
  DistributionStats out;
  out.count = values.size();
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / values.size();
  out.p50 = Quantile(values, 0.5);
  out.p95 = Quantile(values, 0.95);
  out.min = values.front();
  out.max = values.back();
  return out;
}

}  // namespace gpuos
