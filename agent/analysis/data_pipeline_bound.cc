// What held the data pipeline back; see data_pipeline_bound.h.
#include "analysis/data_pipeline_bound.h"

#include <algorithm>
#include <array>

#include "analysis/gpu_idle_attribution.h"
#include "analysis/wakeup_chain.h"
#include "analysis/worker_restarts.h"

namespace gpuos {

static_assert(kHopStateCount == 9, "every HopState is one of the parts below");

double DataPipelineBound::Share(uint64_t part) const {
  const uint64_t all = explained_ns();
  return all ? static_cast<double>(part) / static_cast<double>(all) : 0.0;
}

bool DataPipelineBound::Explained() const {
  return data_idle_ns > 0 && explained_ns() >= kDataLimitMinExplained * static_cast<double>(data_idle_ns);
}

DataPipelineLimit DataPipelineBound::Limit() const {
  if (!Explained()) return DataPipelineLimit::kUnknown;
  const std::array<std::pair<uint64_t, DataPipelineLimit>, 4> parts = {{
      {cpu_ns, DataPipelineLimit::kCpu},
      {disk_ns, DataPipelineLimit::kDisk},
      {cpu_wait_ns, DataPipelineLimit::kCpuWait},
      {other_io_ns, DataPipelineLimit::kOtherIo},
  }};
  const auto largest = std::max_element(parts.begin(), parts.end(),
                                        [](const auto& x, const auto& y) { return x.first < y.first; });
  return Share(largest->first) >= kDataLimitShare ? largest->second : DataPipelineLimit::kUnknown;
}

namespace {

void AddStep(const StepRecord& t, DataPipelineBound& b) {
  for (size_t i = 0; i < kIdleCauseCount; ++i) {
    if (IsDataWait(static_cast<IdleCause>(i))) b.data_idle_ns += t.gpu_idle[i];
  }
  b.cpu_ns += t.gpu_idle[static_cast<size_t>(IdleCause::kDataWaitRunning)];
  b.disk_ns += t.gpu_idle[static_cast<size_t>(IdleCause::kDiskRead)];
  for (const WaitVia& v : t.via) {
    if (!v.last || !IsDataWait(v.cause)) continue;
    const auto at = [&](HopState s) { return v.states[static_cast<size_t>(s)]; };
    b.cpu_ns += at(HopState::kRunning);
    b.disk_ns += at(HopState::kDisk);
    b.cpu_wait_ns += at(HopState::kRunqueue) + at(HopState::kPreempted);
    b.other_io_ns += at(HopState::kIo);
    b.other_ns += at(HopState::kFutex) + at(HopState::kPageFault) + at(HopState::kMmapMunmap) + at(HopState::kUnknown);
  }
}

}  // namespace

DataPipelineBound FindDataPipelineBound(const StepAnalysis& a, bool without_restart_steps) {
  DataPipelineBound b;
  for (const StepRecord& s : a.steps) {
    if (!a.InSummaries(s) || (without_restart_steps && StartedProcesses(s))) continue;
    AddStep(s, b);
  }
  return b;
}

}  // namespace gpuos
