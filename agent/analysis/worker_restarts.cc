// Steps that started a DataLoader's workers again; see worker_restarts.h.
#include "analysis/worker_restarts.h"

#include <algorithm>
#include <vector>

#include "common/median.h"

namespace gpuos {

WorkerRestarts FindWorkerRestarts(const StepAnalysis& a) {
  WorkerRestarts r;
  std::vector<uint64_t> others;
  for (const StepRecord& s : a.steps) {
    if (!a.InSummaries(s)) continue;
    if (!StartedProcesses(s)) {
      others.push_back(s.duration_ns());
      continue;
    }
    ++r.steps;
    r.starts += s.os.child_starts;
    r.execs += s.os.child_execs;
    r.step_ns += s.duration_ns();
    r.data_stage_ns += s.stages[static_cast<size_t>(Stage::kDataLoading)];
    r.data_wait_ns += s.cpu.data_wait_ns;
  }
  if (r.steps == 0 || others.empty()) return WorkerRestarts{};
  r.median_other_ns = Median(others);
  r.excess_ns = r.step_ns - std::min(r.step_ns, r.median_other_ns * r.steps);
  return r;
}

void KeepEpochStartsMeasured(std::vector<StepRecord>& steps, size_t warmup_steps) {
  std::vector<uint64_t> launches;
  for (const StepRecord& s : steps) {
    if (!s.warmup && s.left_out.empty()) launches.push_back(s.api.launch);
  }
  const uint64_t median = Median(launches);
  if (median == 0) return;  // no GPU work: the CPU rule (step_extra_work.h) judged forks already
  for (size_t i = warmup_steps; i < steps.size(); ++i) {
    StepRecord& s = steps[i];
    if (!StartedProcesses(s) || s.left_out.rfind(kIrregularWorkReason, 0) != 0) continue;
    if (static_cast<double>(s.api.launch) > kEpochStartMaxLaunches * static_cast<double>(median)) continue;
    s.left_out.clear();
    s.warmup = false;
  }
}

}  // namespace gpuos
