// Runs the rule table and ranks its findings; see diagnosis.h.  The rules
// themselves are in diagnosis_rules.cc and the *_rule.cc files beside it.
#include "analysis/diagnosis.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "analysis/diagnosis_rule_support.h"
#include "analysis/worker_restarts.h"

namespace gpuos {

const char* BottleneckKey(Bottleneck b) {
  switch (b) {
    case Bottleneck::kNoSteps: return "no_steps";
    case Bottleneck::kNoGpuActivity: return "no_gpu_activity";
    case Bottleneck::kNoneDominant: return "none_dominant";
    case Bottleneck::kGpuBound: return "gpu_bound";
    case Bottleneck::kDataLoader: return "data_loader_starvation";
    case Bottleneck::kPageableCopies: return "pageable_sync_copies";
    case Bottleneck::kSerializedCopies: return "copies_serialized_with_compute";
    case Bottleneck::kLaunchBound: return "launch_bound";
    case Bottleneck::kHostCpuWork: return "host_cpu_work";
    case Bottleneck::kCpuContention: return "cpu_contention";
    case Bottleneck::kIntermittentStalls: return "intermittent_stalls";
    case Bottleneck::kDominantStage: return "dominant_stage";
    case Bottleneck::kStraggler: return "straggler";
    case Bottleneck::kWorkerProcesses: return "worker_process_wait";
    case Bottleneck::kAllocatorChurn: return "allocator_churn";
    case Bottleneck::kWorkerRestarts: return "dataloader_worker_restarts";
  }
  return "unknown";
}

const char* BottleneckTitle(Bottleneck b) {
  switch (b) {
    case Bottleneck::kNoSteps: return "no training steps found";
    case Bottleneck::kNoGpuActivity: return "no GPU activity recorded";
    case Bottleneck::kNoneDominant: return "no single dominant bottleneck";
    case Bottleneck::kGpuBound: return "GPU-bound";
    case Bottleneck::kDataLoader: return "data-loader starvation";
    case Bottleneck::kPageableCopies: return "synchronous copies from pageable memory";
    case Bottleneck::kSerializedCopies: return "copies serialized with compute";
    case Bottleneck::kLaunchBound: return "launch-bound (CPU dispatch)";
    case Bottleneck::kHostCpuWork: return "CPU-bound (the job's own CPU work between GPU work)";
    case Bottleneck::kCpuContention: return "CPU contention (too many workers)";
    case Bottleneck::kIntermittentStalls: return "intermittent stalls";
    case Bottleneck::kDominantStage: return "one stage dominates the step";
    case Bottleneck::kStraggler: return "a straggler rank holds the others back";
    case Bottleneck::kWorkerProcesses: return "waiting for the job's worker processes";
    case Bottleneck::kAllocatorChurn: return "GPU memory allocated and freed every step";
    case Bottleneck::kWorkerRestarts: return "DataLoader workers started again every epoch";
  }
  return "unknown";
}

namespace {

using rule_support::Pct;

// "intermittent data stalls costing 17.7% of the run"
std::string StallPhrase(const IntermittentStalls& s) {
  if (s.at_start) return absl::StrFormat("slow start-up steps costing %s of the run", Pct(s.share_of_run));
  const std::optional<Stage> stage = s.MainStage();
  const std::string word = stage ? StallKindWord(*stage) : "";
  return absl::StrFormat("intermittent %sstalls costing %s of the run", word.empty() ? "" : word + " ",
                         Pct(s.share_of_run));
}

std::string StageRecommendation(Stage stage, const StepAnalysis& a) {
  switch (stage) {
    case Stage::kGpuCompute:
      return absl::StrFormat(
          "Most of the step is GPU compute, though below the %.0f%% that makes it GPU-bound: faster kernels "
          "(mixed precision, fused kernels) shorten it most; the stage table shows the exposed rest.",
          kGpuBoundKernelShare * 100);
    case Stage::kDataLoading:
      return "Most of the step waits for data: more DataLoader workers or cheaper preprocessing.";
    case Stage::kTransfer:
      return "Most of the step copies between host and GPU: pinned memory, non_blocking copies on a copy "
             "stream, fewer and larger transfers.";
    case Stage::kDispatch:
      return a.practices.GraphsInUse(a.measured_steps)
                 ? "Most of the step is in launch calls, though the step already replays CUDA graphs: capture "
                   "the launches still outside them, or raise the batch size."
                 : "Most of the step is in kernel launch calls: CUDA graphs (torch.compile "
                   "mode=\"reduce-overhead\") or a larger batch.";
    case Stage::kCommunication:
      return "Most of the step the GPU sits in collectives (NCCL) with no compute beside them: it waits for the "
             "other ranks or for the network. Trace every rank to see which one is late (the ranks table), and "
             "overlap what is left with compute (DDP's bucket_cap_mb, gradient accumulation with no_sync).";
    case Stage::kOsOverhead:
      return "Most of the step is operating-system cost while the GPU waits: see the OS-cost table (page "
             "faults, preemption, mmap/munmap, blocking syscalls).";
    default:
      return "Most of the step is synchronization, other CUDA calls or CPU work between launches: remove "
             "per-step synchronizations (.item(), .cpu(), printing tensors) and move CPU work out of the loop.";
  }
}

// No rule fired: name the largest stage when it passes kDominantStageShare,
// else there is no single dominant bottleneck.
Finding Fallback(const DiagnosisInputs& in, std::string& headline) {
  const StepAnalysis& a = in.analysis;
  const StepRecord& t = a.measured_total;
  size_t top = 0;
  for (size_t i = 1; i < kStageCount; ++i) {
    if (t.stages[i] > t.stages[top]) top = i;
  }
  auto share = [&](uint64_t part) { return a.measured_wall_ns ? static_cast<double>(part) / a.measured_wall_ns : 0; };
  Finding f;
  f.score = share(t.stages[top]);
  f.gain_model = "not estimated: no rule's pattern matched";
  std::string numbers =
      absl::StrFormat("the largest stage is %s at %s of step time; GPU idle %s, kernels %s",
                      StageName(static_cast<Stage>(top)), Pct(f.score), Pct(share(t.gpu.idle_ns)),
                      Pct(share(t.gpu.kernel_busy_ns)));
  if (LaunchBoundRuleAt(in, kGpuIdleHighShare * (1 - kNearThresholdFraction))) {
    f.near_miss = Bottleneck::kLaunchBound;
    absl::StrAppendFormat(&numbers,
                          "; the GPU idle, most of it waiting on the CPU, is within %.0f%% of the %.0f%% from which "
                          "the step reads launch-bound: another run of the job may read so",
                          kNearThresholdFraction * 100, kGpuIdleHighShare * 100);
  }
  if (f.score > kDominantStageShare) {
    f.bottleneck = Bottleneck::kDominantStage;
    f.evidence = "no rule's threshold was reached, but " + numbers + ".";
    f.recommendation = StageRecommendation(static_cast<Stage>(top), a);
    headline = absl::StrFormat("%s dominates the step (%s of step time)", StageName(static_cast<Stage>(top)),
                               Pct(f.score));
  } else {
    f.bottleneck = Bottleneck::kNoneDominant;
    f.evidence = absl::StrFormat(
        "no rule's threshold was reached and no stage passes %.0f%% of step time; %s; no finding would shorten "
        "the mean step by %.0f%% or more.",
        kDominantStageShare * 100, numbers, kStallCostShare * 100);
    f.recommendation =
        "Look at the stage and GPU-idle tables for the next thing to shorten; the step is not limited by a "
        "single cause.";
  }
  return f;
}

std::string Headline(const Diagnosis& d) {
  if (d.primary.bottleneck == Bottleneck::kIntermittentStalls) return StallPhrase(d.stalls);
  std::string h = d.headline.empty() ? BottleneckTitle(d.primary.bottleneck) : d.headline;
  for (const Finding& f : d.secondary) {
    if (f.bottleneck == Bottleneck::kIntermittentStalls) return h + ", with " + StallPhrase(d.stalls);
  }
  return h;
}

// By gain, unestimated gains last; ties keep the table's order.
void RankByGain(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& x, const Finding& y) {
    if (x.gain.has_value() != y.gain.has_value()) return x.gain.has_value();
    return x.gain.value_or(0) > y.gain.value_or(0);
  });
}

// A loader too slow on average delivers in bursts: with prefetching, most
// steps find a batch ready and every few wait long for the next.  Those
// long steps are the data-loading finding, not stalls of their own (whose
// advice assumes the loader keeps up on average): they are told in it.
void FoldDataStallsIntoDataLoading(const IntermittentStalls& stalls, std::vector<Finding>& steady,
                                   std::vector<Finding>& tail) {
  auto data = std::find_if(steady.begin(), steady.end(),
                           [](const Finding& f) { return f.bottleneck == Bottleneck::kDataLoader; });
  auto stall = std::find_if(tail.begin(), tail.end(),
                            [](const Finding& f) { return f.bottleneck == Bottleneck::kIntermittentStalls; });
  if (data == steady.end() || stall == tail.end() || stalls.MainStage() != Stage::kDataLoading) return;
  const size_t gain_at = std::min(data->evidence.find(" Expected gain:"), data->evidence.size());
  data->evidence.insert(gain_at, absl::StrFormat(
      " The waits come in bursts: %zu of %zu measured steps waited longer than %.3f ms (median step %.3f ms), the "
      "others found a batch ready.",
      stalls.stalled.size(), stalls.steps_considered, stalls.threshold_ns / 1e6, stalls.median_ns / 1e6));
  tail.erase(stall);
}

// A trace without GPU records: that finding first, then the rules that do
// not need the GPU side.
void DiagnoseWithoutGpuRecords(const DiagnosisInputs& in, Diagnosis& d) {
  const StepAnalysis& a = in.analysis;
  const StepRecord& t = a.measured_total;
  const double data_wait = in.Share(t.cpu.data_wait_ns);
  Finding f;
  f.bottleneck = Bottleneck::kNoGpuActivity;
  f.score = 1;
  f.gain_model = "not estimated: no GPU records";
  f.evidence = absl::StrFormat(
      "no kernels, copies or memsets of pid %u in %zu measured steps (%.3f ms each); the launching thread "
      "waited for data %s of step time",
      a.pid, in.steps(), in.steps() ? in.wall_ns() / 1e6 / in.steps() : 0.0, Pct(data_wait));
  f.recommendation =
      "Check the report's CUDA shim status (CUPTI may be inactive or taken by another profiler), or the job "
      "ran on the CPU; GPU idle time cannot be attributed without GPU records.";
  const JobPractices& p = a.practices;
  if (p.kernel_launches + p.graph_launches > 0) {
    // The job did launch GPU work: what is missing is the record of it,
    // and the report must not read as if the GPU sat unused.
    absl::StrAppendFormat(&f.evidence,
                          "; yet the job made %.1f kernel launch and %.1f graph launch calls per step: its GPU "
                          "work ran but was not recorded",
                          in.PerStep(p.kernel_launches), in.PerStep(p.graph_launches));
    f.recommendation =
        "The GPU side of this trace is missing, not idle: the CUDA calls were seen from the CPU only (an attach "
        "that could not load the shim falls back to uprobes on libcuda; the report's CUDA status says why) or "
        "CUPTI was inactive. Record again with the shim: attach when the job's threads wait (or start it with "
        "gpuos-trace --prepare), or launch it under gpuos-trace.";
  }
  d.primary = f;
  std::vector<Finding> data;
  if (data_wait >= kDataWaitShare) {
    Finding g;
    g.bottleneck = Bottleneck::kDataLoader;
    g.score = data_wait;
    g.gain = data_wait;
    g.gain_model = "the thread's data waits removed from every step";
    const DataPipelineBound bound = rule_support::PipelineBound(in);
    g.evidence = absl::StrFormat("the launching thread waited for data %s of step time; %s.", Pct(data_wait),
                                 rule_support::WorkersText(a)) +
                 rule_support::DataPipelineText(in, bound);
    g.recommendation = rule_support::DataLoaderAdvice(in, bound);
    data.push_back(g);
  }
  std::vector<Finding> stalls;
  if (auto stall = IntermittentStallsRule(in)) stalls.push_back(*stall);
  FoldDataStallsIntoDataLoading(in.stalls, data, stalls);
  d.secondary.insert(d.secondary.end(), data.begin(), data.end());
  d.secondary.insert(d.secondary.end(), stalls.begin(), stalls.end());
  if (auto s = StragglerRule(in)) d.secondary.push_back(*s);
  RankByGain(d.secondary);
}

// The rules' findings in the order they are reported: steady-state ones by
// score (a GPU-bound finding after the serialized copies it sits in), then
// the tail's.
std::vector<Finding> FiredRules(const DiagnosisInputs& in) {
  std::vector<Finding> steady;
  std::vector<Finding> tail;
  for (const DiagnosisRule& rule : DiagnosisRules()) {
    if (auto f = rule.test(in)) (rule.steady_state ? steady : tail).push_back(std::move(*f));
  }
  std::stable_sort(steady.begin(), steady.end(), [](const Finding& x, const Finding& y) { return x.score > y.score; });
  // A busy GPU that also sits in serialized copies: hiding the copies is
  // the next step, optimizing kernels the one after (see diagnosis.h).
  auto gpu = std::find_if(steady.begin(), steady.end(),
                          [](const Finding& f) { return f.bottleneck == Bottleneck::kGpuBound; });
  auto copies = std::find_if(steady.begin(), steady.end(),
                             [](const Finding& f) { return f.bottleneck == Bottleneck::kSerializedCopies; });
  if (gpu != steady.end() && copies != steady.end() && gpu < copies) {
    gpu->recommendation =
        "Once the copies overlap compute, the GPU is the bottleneck: optimize the kernels -- mixed precision "
        "(AMP, bf16) for Tensor Cores, torch.compile or fused kernels, channels-last layouts.";
    std::rotate(gpu, copies, copies + 1);
  }
  // Frees that drain the GPU's queue every step take the CPU's lead over
  // the GPU: the other readings are of a step the churn reshaped, so the
  // churn comes first.
  auto churn = std::find_if(steady.begin(), steady.end(),
                            [](const Finding& f) { return f.bottleneck == Bottleneck::kAllocatorChurn; });
  if (churn != steady.end() && AllocatorChurnComesFirst(in)) {
    std::rotate(steady.begin(), churn, churn + 1);
  }
  FoldDataStallsIntoDataLoading(in.stalls, steady, tail);
  std::vector<Finding> fired = std::move(steady);
  fired.insert(fired.end(), tail.begin(), tail.end());
  return fired;
}

}  // namespace

Diagnosis Diagnose(const StepAnalysis& a, const Straggler* straggler) {
  Diagnosis d;
  if (!a.has_steps()) {
    d.primary.bottleneck = Bottleneck::kNoSteps;
    d.primary.evidence = a.note;
    d.primary.gain_model = "not estimated: no steps";
    d.primary.recommendation =
        "Mark each training step with an NVTX range (e.g. nvtx.annotate(f\"step {i}\")), or pass --step-regex.";
    d.headline = BottleneckTitle(d.primary.bottleneck);
    return d;
  }
  // Steps that started DataLoader workers again have a finding of their
  // own; the stalls are the long steps left.
  const bool restarts_count = WorkerRestartsThatCount({a, IntermittentStalls(), straggler}).steps > 0;
  d.stalls = FindIntermittentStalls(a, restarts_count ? &StartedProcesses : nullptr);
  const DiagnosisInputs in{a, d.stalls, straggler};
  const StepRecord& t = a.measured_total;
  if (t.gpu.kernel_ns + t.gpu.memcpy_ns + t.gpu.memset_ns == 0) {
    DiagnoseWithoutGpuRecords(in, d);
    d.headline = Headline(d);
    return d;
  }
  std::vector<Finding> fired = FiredRules(in);
  if (fired.empty()) {
    d.primary = Fallback(in, d.headline);
  } else {
    d.primary = fired.front();
    d.secondary.assign(fired.begin() + 1, fired.end());
    RankByGain(d.secondary);
  }
  d.headline = Headline(d);
  return d;
}

}  // namespace gpuos
