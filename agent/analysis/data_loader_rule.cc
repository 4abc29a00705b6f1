// The data_loader_starvation rule; see diagnosis.h for what it tests,
// scores and gains.  Its advice follows what held the data pipeline back
// (data_pipeline_bound.h): more workers for preprocessing on a host with
// cores to spare, storage for a pipeline waiting on the disk, fewer threads
// for workers waiting for a CPU.
#include "absl/strings/str_format.h"
#include "analysis/diagnosis.h"
#include "analysis/diagnosis_rule_support.h"
#include "analysis/worker_restarts.h"

namespace gpuos {
namespace {

using namespace rule_support;

// Worker processes that no name ties to a DataLoader (PyTorch 2.3 and
// later name its workers pt_data_worker).
bool UnnamedWorkers(const StepAnalysis& a) { return a.worker_processes > 0 && a.worker_threads == 0; }

}  // namespace

std::optional<Finding> DataLoaderRule(const DiagnosisInputs& in) {
  const StepRecord& t = in.total();
  // The data loading of the steps that started the workers again is
  // dataloader_worker_restarts' where that fires: more workers would not
  // shorten it.
  const WorkerRestarts restarts = WorkerRestartsThatCount(in);
  const uint64_t data_wait_ns = t.cpu.data_wait_ns - std::min(t.cpu.data_wait_ns, restarts.data_wait_ns);
  const uint64_t stage_ns = t.stages[static_cast<size_t>(Stage::kDataLoading)];
  const double data_wait = in.Share(data_wait_ns);
  const double idle = in.Share(t.gpu.idle_ns);
  const double stage = in.Share(stage_ns - std::min(stage_ns, restarts.data_stage_ns));
  // Either the thread sat in data-fetch ranges while the GPU idled, or the
  // GPU idled waiting for data by the idle attribution (which can know it
  // without ranges, from who woke the thread): the stage implies both.
  if (!(data_wait >= kDataWaitShare && idle >= kGpuIdleHighShare) && stage < kDataWaitShare) return std::nullopt;
  const StepAnalysis& a = in.analysis;
  if (a.WorkersAreNotADataLoaders()) return std::nullopt;  // worker_process_wait's
  const size_t n = in.steps();
  const double step_ms = n ? in.wall_ns() / 1e6 / n : 0;
  uint64_t idle_in_data = 0;
  for (size_t i = 0; i < kIdleCauseCount; ++i) {
    if (IsDataWait(static_cast<IdleCause>(i))) idle_in_data += t.gpu_idle[i];
  }
  Finding f;
  f.bottleneck = Bottleneck::kDataLoader;
  f.score = stage;
  f.gain = f.score;
  f.gain_model = "the exposed data loading (GPU idle while the thread waited for data) removed from every step";
  f.evidence = absl::StrFormat(
      "the launching thread waited for data %s of step time (%.3f of %.3f ms per step); the GPU was idle %s of "
      "step time, %s while the thread waited for data (%s blocked in futex on the loader); %s.",
      Pct(data_wait), n ? data_wait_ns / 1e6 / n : 0.0, step_ms, Pct(idle), Pct(in.Share(idle_in_data)),
      Pct(in.Share(in.Idle(IdleCause::kDataWaitFutex))), WorkersText(a));
  if (data_wait < kDataWaitShare) {
    f.evidence += absl::StrFormat(" The GPU-idle attribution puts %s of step time in waiting for data.", Pct(stage));
  }
  if (restarts.steps > 0) {
    f.evidence += absl::StrFormat(
        " The thread's wait for data and the data-loading stage here leave out the %zu steps that started the "
        "workers again (dataloader_worker_restarts).",
        restarts.steps);
  }
  const bool cannot_tell = UnnamedWorkers(a) && !a.data_fetch_ranges;
  if (cannot_tell) {
    f.evidence +=
        " The trace cannot tell whether the worker processes waited on are a DataLoader's: none is named like "
        "PyTorch's (pt_data_worker, from PyTorch 2.3) and there are no data-fetch ranges; recorded with the "
        "Python hook (gpuos-trace -- python ...), it would.";
  }
  const DataPipelineBound bound = FindDataPipelineBound(a, /*without_restart_steps=*/restarts.steps > 0);
  f.evidence += DataPipelineText(in, bound);
  AppendGain(f);
  f.recommendation = DataLoaderAdvice(in, bound);
  if (cannot_tell) {
    f.recommendation = "If the worker processes are a DataLoader's: " + f.recommendation +
                       " If they are other worker processes (vectorized environments, a simulator), more DataLoader "
                       "workers will not help: shorten their work or overlap it with the GPU's.";
  }
  return f;
}

}  // namespace gpuos
