// The bottleneck rules, one function each (launch_bound's, with its
// advice by what the job already does, in launch_bound_rule.cc; the data
// loader's in data_loader_rule.cc); see
// diagnosis.h for what each one tests, scores and gains.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "analysis/diagnosis.h"
#include "analysis/diagnosis_rule_support.h"

namespace gpuos {
namespace {

using namespace rule_support;

// Host-to-device copy time on streams that ran no kernels in the step.
double CopyStreamShare(const StepRecord& t) {
  return Share(t.gpu.htod_ns - std::min(t.gpu.htod_ns, t.gpu.htod_on_kernel_stream_ns), t.gpu.htod_ns);
}

}  // namespace

double DiagnosisInputs::Share(uint64_t part) const { return rule_support::Share(part, wall_ns()); }
double DiagnosisInputs::PerStep(uint64_t total) const {
  return steps() ? static_cast<double>(total) / steps() : 0.0;
}

std::optional<Finding> GpuBoundRule(const DiagnosisInputs& in) {
  const StepRecord& t = in.total();
  const IntermittentStalls& st = in.stalls;
  const double typical_share = Share(st.typical_total.gpu.kernel_busy_ns, st.typical_wall_ns);
  if (typical_share < kGpuBoundKernelShare) return std::nullopt;
  const StepAnalysis& a = in.analysis;
  Finding f;
  f.bottleneck = Bottleneck::kGpuBound;
  f.score = in.Share(t.gpu.kernel_busy_ns);
  const double step_ms = in.steps() ? in.wall_ns() / 1e6 / in.steps() : 0;
  if (st.found()) {
    f.evidence = absl::StrFormat(
        "kernels ran %s of the typical step (the %zu measured steps without intermittent stalls; median step %.3f "
        "ms) and %s of all measured step time (GPU idle %s, copies alone %s); mean step %.3f ms, %.0f kernels per "
        "step.",
        Pct(typical_share), st.typical_steps, st.median_ns / 1e6, Pct(f.score), Pct(in.Share(t.gpu.idle_ns)),
        Pct(in.Share(t.gpu.copy_only_ns)), step_ms, in.PerStep(t.gpu.compute_kernels_started()));
  } else {
    f.evidence = absl::StrFormat(
        "kernels ran %s of step time (GPU idle %s, copies alone %s); mean step %.3f ms, %.0f kernels per step.",
        Pct(f.score), Pct(in.Share(t.gpu.idle_ns)), Pct(in.Share(t.gpu.copy_only_ns)), step_ms,
        in.PerStep(t.gpu.compute_kernels_started()));
  }
  f.gain_model = absl::StrFormat(
      "not estimated from the trace -- the step shortens by the kernel time saved: each 10%% off kernel time "
      "shortens the mean step by %s",
      Pct(f.score * 0.1));
  AppendGain(f);
  if (a.practices.GraphsInUse(in.steps())) {
    f.recommendation =
        "The GPU is the bottleneck, and the step already replays CUDA graphs, so launch overhead is not what is "
        "left: make the kernels faster -- mixed precision (AMP, bf16) for Tensor Cores, fused kernels, "
        "channels-last layouts; input-pipeline changes will not help.";
  } else {
    f.recommendation =
        "The GPU is the bottleneck: optimize the kernels -- mixed precision (AMP, bf16) for Tensor Cores, "
        "torch.compile or fused kernels, channels-last layouts; input-pipeline changes will not help.";
  }
  return f;
}

std::optional<Finding> WorkerProcessesRule(const DiagnosisInputs& in) {
  const StepAnalysis& a = in.analysis;
  const double stage = in.Share(in.total().stages[static_cast<size_t>(Stage::kDataLoading)]);
  if (stage < kDataWaitShare || !a.WorkersAreNotADataLoaders()) return std::nullopt;
  Finding f;
  f.bottleneck = Bottleneck::kWorkerProcesses;
  f.score = stage;
  f.gain = stage;
  f.gain_model = "the GPU idle spent waiting on the worker processes removed from every step";
  f.evidence = absl::StrFormat(
      "the GPU was idle %s of step time while the launching thread waited on the job's %u worker processes. "
      "They are not a DataLoader's: the Python hook ran and marked no data fetch, and none is named like "
      "PyTorch's DataLoader workers.",
      Pct(stage), a.worker_processes);
  AppendGain(f);
  f.recommendation =
      "The GPU waits for work the job does in its other processes (vectorized environments in subprocesses, a "
      "simulator, a server): more DataLoader workers will not help. Shorten that work per step, give the "
      "processes free cores (fewer processes than cores, several environments per process), or overlap it with "
      "the GPU's (step the environments while the policy runs, as asynchronous vector environments and EnvPool "
      "do).";
  return f;
}

std::optional<Finding> PageableCopiesRule(const DiagnosisInputs& in) {
  const StepRecord& t = in.total();
  const double pageable = in.Share(t.exposed_pageable_copy_ns + t.exposed_mm_ns);
  if (t.api.pageable_memcpy == 0 || pageable < kPageableShare) return std::nullopt;
  const JobPractices& p = in.analysis.practices;
  Finding f;
  f.bottleneck = Bottleneck::kPageableCopies;
  f.score = pageable;
  f.gain = pageable;
  f.gain_model = "the exposed pageable-copy and mmap/munmap time removed (pinned, asynchronous copies overlap GPU work)";
  f.evidence = absl::StrFormat(
      "with no kernel running, the launching thread sat in cudaMemcpy from/to pageable memory %s of step "
      "time and in mmap/munmap %s (%.1f munmap calls, %.1f MiB per step); %.1f pageable copies per step; "
      "GPU idle %s of step time (%s in pageable memcpy, %s in munmap); %u of %u host-to-device copies from pinned "
      "memory, %u issued async.",
      Pct(in.Share(t.exposed_pageable_copy_ns)), Pct(in.Share(t.exposed_mm_ns)), in.PerStep(t.os.munmap.calls),
      in.PerStep(t.os.munmap.bytes) / 1048576.0, in.PerStep(t.api.pageable_memcpy), Pct(in.Share(t.gpu.idle_ns)),
      Pct(in.Share(in.Idle(IdleCause::kPageableMemcpy))), Pct(in.Share(in.Idle(IdleCause::kMunmap))), p.htod_pinned,
      p.htod_copies, p.htod_async);
  AppendGain(f);
  if (p.CopiesAsync()) {
    f.recommendation =
        "The copies are already issued asynchronously (non_blocking=True), but from pageable memory the driver "
        "stages them through a bounce buffer and the call blocks: pin the source -- DataLoader(pin_memory=True) "
        "or tensor.pin_memory() -- so the copy overlaps GPU work and the munmap after each copy goes away.";
  } else {
    f.recommendation =
        "Copy from pinned memory, asynchronously: DataLoader(pin_memory=True) and tensor.to(device, "
        "non_blocking=True). The copy then neither stages through pageable memory nor blocks the thread that "
        "launches the kernels, and the munmap that followed each copy overlaps GPU work instead of stalling it.";
  }
  return f;
}

std::optional<Finding> SerializedCopiesRule(const DiagnosisInputs& in) {
  const StepRecord& t = in.total();
  const StepAnalysis& a = in.analysis;
  const double copy_only = in.Share(t.gpu.copy_only_ns);
  const double same_stream = Share(t.gpu.htod_on_kernel_stream_ns, t.gpu.htod_ns);
  const double overlap = Share(t.gpu.copy_overlap_ns, t.gpu.memcpy_ns);
  // Below kSerializedCopyShare the copies must cost every step (the median
  // step's copy-only share), not a few: a handful of stalled steps must not
  // hide a copy that serializes with compute in all of them, nor fake one.
  std::vector<double> step_copy_only;
  for (const StepRecord& s : a.steps) {
    if (in.analysis.InSummaries(s) && !s.warmup && s.duration_ns() > 0) step_copy_only.push_back(Share(s.gpu.copy_only_ns, s.duration_ns()));
  }
  double median_copy_only = 0;
  if (!step_copy_only.empty()) {
    std::nth_element(step_copy_only.begin(), step_copy_only.begin() + step_copy_only.size() / 2,
                     step_copy_only.end());
    median_copy_only = step_copy_only[step_copy_only.size() / 2];
  }
  const bool copies_every_step =
      copy_only >= kSerializedCopyBusyGpuShare && median_copy_only >= kSerializedCopyBusyGpuShare;
  if (!(copy_only >= kSerializedCopyShare || copies_every_step) ||
      !(same_stream >= kSameStreamFraction || overlap < kCopyOverlapFraction)) {
    return std::nullopt;
  }
  const JobPractices& p = a.practices;
  const double copy_stream = CopyStreamShare(t);
  Finding f;
  f.bottleneck = Bottleneck::kSerializedCopies;
  f.score = copy_only;
  f.gain = copy_only;
  f.gain_model = "the GPU's copy-only time hidden behind compute";
  f.evidence = absl::StrFormat(
      "the GPU copied with no kernel running %s of step time (%s in the median step; GPU idle %s, kernels "
      "%s); only %s of copy time overlapped a kernel; %s of host-to-device copy time was on streams that "
      "also ran the kernels; overlapping the copies with compute can shorten the step by up to %s; %u of %u "
      "host-to-device copies from pinned memory, %u issued async.",
      Pct(copy_only), Pct(median_copy_only), Pct(in.Share(t.gpu.idle_ns)), Pct(in.Share(t.gpu.kernel_busy_ns)),
      Pct(overlap), Pct(same_stream), Pct(copy_only), p.htod_pinned, p.htod_copies, p.htod_async);
  AppendGain(f);
  if (t.gpu.htod_ns > 0 && copy_stream >= kSameStreamFraction) {
    f.recommendation = absl::StrFormat(
        "A copy stream is already used (%s of host-to-device copy time on streams without kernels), but only %s "
        "of copy time overlaps a kernel: the compute stream waits for each copy right after it is issued. Copy "
        "batch N+1 while batch N computes (prefetch one batch ahead) and make the compute stream wait on the "
        "copy's event only when it uses that batch.",
        Pct(copy_stream), Pct(overlap));
  } else if (p.CopiesPinned() && p.CopiesAsync()) {
    f.recommendation =
        "The copies are already from pinned memory and asynchronous (non_blocking=True); what is left is "
        "overlapping them: copy the next batch on a separate CUDA stream (a prefetcher) while the current one "
        "computes, and make the compute stream wait on the copy stream.";
  } else {
    f.recommendation =
        "Overlap copies with compute: copy the next batch on a separate CUDA stream (a prefetcher) while the "
        "current one computes, from pinned memory with non_blocking=True, and make the compute stream wait on "
        "the copy stream.";
  }
  return f;
}

std::optional<Finding> HostCpuWorkRule(const DiagnosisInputs& in) {
  const StepRecord& t = in.total();
  const uint64_t host = in.Idle(IdleCause::kHostWork);
  const double idle = in.Share(t.gpu.idle_ns);
  if (idle < kGpuIdleHighShare || in.Share(host) < kHostWorkShare) return std::nullopt;
  Finding f;
  f.bottleneck = Bottleneck::kHostCpuWork;
  f.score = in.Share(host);
  f.gain_model =
      "not estimated: how much of that work can leave the loop or overlap the GPU's is the job's design, which "
      "the trace does not show";
  f.evidence = absl::StrFormat(
      "the GPU was idle %s of step time; while it was idle the launching thread %s %s of step time, against launch "
      "calls %s, other CUDA calls %s and code between CUDA calls %s; %.0f kernels and %.0f launch calls per step.",
      Pct(idle), HostWorkText(), Pct(f.score), Pct(in.Share(in.Idle(IdleCause::kLaunching))),
      Pct(in.Share(in.Idle(IdleCause::kOtherCudaApi))), Pct(in.Share(in.Idle(IdleCause::kOtherCpu))),
      in.PerStep(t.gpu.compute_kernels_started()), in.PerStep(t.api.launch));
  if (!in.analysis.data_fetch_ranges) {
    // Without the Python hook's fetch ranges (or the job's own), loading a
    // batch in this thread looks like any other CPU work before a copy.
    f.evidence +=
        " The trace has no data-fetch ranges (attached, --no-python-hooks, or no DataLoader in the loop), so a "
        "batch loaded in this thread (a DataLoader with num_workers=0) is counted here too; recorded with the "
        "Python hook (gpuos-trace -- python ...), that loading is named data loading.";
  }
  AppendGain(f);
  f.recommendation =
      "The GPU waits while the training thread makes data for it on the CPU (an environment's steps, a batch "
      "loaded or preprocessed in the loop): a CUDA graph or torch.compile would not shorten it. Take it off the "
      "loop's critical path: move it to other processes (DataLoader(num_workers=N), vectorized environments), "
      "vectorize it (batched numpy or torch ops), or overlap it with the GPU (queue the GPU work first, do the "
      "CPU work while it runs, synchronize last).";
  return f;
}

std::optional<Finding> CpuContentionRule(const DiagnosisInputs& in) {
  const StepRecord& t = in.total();
  const StepAnalysis& a = in.analysis;
  const double contention = in.Share(t.off_cpu.preempted_ns + t.off_cpu.runqueue_ns);
  if (contention < kContentionShare || a.worker_processes < kManyWorkers) return std::nullopt;
  const uint32_t cpus = a.practices.online_cpus;
  Finding f;
  f.bottleneck = Bottleneck::kCpuContention;
  f.score = contention;
  f.gain = in.Share(in.Idle(IdleCause::kPreemptedRunqueue));
  f.gain_model = "the preemption and run-queue waits of the launching thread that left the GPU idle removed";
  f.evidence = absl::StrFormat(
      "the launching thread was preempted or waited for a CPU %s of step time (%.1f involuntary switches per "
      "step); %s made %.1f involuntary switches per step.",
      Pct(contention), in.PerStep(t.os.launching.involuntary), WorkersText(a), in.PerStep(t.os.workers.involuntary));
  AppendGain(f);
  std::string cores;
  if (cpus > 0) {
    cores = a.worker_processes >= cpus
                ? absl::StrFormat(" -- more worker processes than the host's %u online CPUs --", cpus)
                : absl::StrFormat(" -- the host has %u online CPUs --", cpus);
  }
  f.recommendation = absl::StrFormat(
      "Too many workers compete with the training thread for CPUs: lower num_workers (now %u)%s, keep each "
      "worker single-threaded (torch.set_num_threads(1), OMP_NUM_THREADS=1), or pin the trainer to a core of "
      "its own.",
      a.worker_processes, cores);
  return f;
}

const char* StallKindWord(Stage stage) {
  switch (stage) {
    case Stage::kDataLoading: return "data";
    case Stage::kTransfer: return "copy";
    case Stage::kDispatch: return "dispatch";
    case Stage::kGpuCompute: return "GPU-work";
    case Stage::kCommunication: return "communication";
    case Stage::kOsOverhead: return "OS";
    default: return "";
  }
}

namespace {

std::string StallRecommendation(const DiagnosisInputs& in, std::optional<Stage> stage) {
  const StepAnalysis& a = in.analysis;
  std::string r;
  switch (stage.value_or(Stage::kOther)) {
    case Stage::kDataLoading:
      r = "Data arrives late in some steps: the loader keeps up on average but not always. Raise "
          "prefetch_factor so a slow batch is absorbed, even out the cost per sample (pre-decoded data, no "
          "occasional heavy samples), check the workers' storage I/O, and use persistent_workers=True if the "
          "stalls follow epoch starts.";
      if (WorkersAtCoreCount(a)) r += " The workers already fill the host's CPUs: more workers will not help.";
      break;
    case Stage::kTransfer:
      r = "Some steps copy much more, or wait for a copy: look for occasional large transfers (logging or "
          "checkpointing with .cpu()/.item() of big tensors) and make them asynchronous or less frequent.";
      break;
    case Stage::kDispatch:
      r = "Some steps launch far more work: recompilation (torch.compile recompiles on new shapes) or a "
          "changing batch shape; keep shapes static (drop_last=True, torch._dynamo.mark_dynamic).";
      break;
    case Stage::kGpuCompute:
      r = "Some steps run much more GPU work: evaluation, logging or a larger batch in the loop; run it less "
          "often, or outside the timed loop.";
      break;
    case Stage::kCommunication:
      r = "In some steps the GPU waits longer in collectives (NCCL) for the other ranks: a rank that does extra "
          "work now and then (rank 0's logging, evaluation or checkpoint, a slow data batch on one rank) holds "
          "the others at the next collective; trace every rank (the ranks table names who is late), and move that "
          "work off the step or spread it over the ranks.";
      break;
    case Stage::kOsOverhead:
      r = "Some steps stall in the operating system (page faults, preemption, mmap/munmap, blocking syscalls): "
          "see the OS-cost table; usual causes are memory pressure, checkpoint writes and other processes on "
          "the same cores.";
      break;
    default:
      r = "Some steps wait much longer in synchronizations or CPU code: look for periodic logging with "
          ".item(), checkpointing or garbage collection in the loop.";
      break;
  }
  if (in.stalls.at_start) {
    return absl::StrFormat(
        "These are the run's first steps: start-up costs (compilation, cuDNN autotuning, allocator growth, "
        "DataLoader workers starting) that a longer run pays once. Leave them out with --warmup-steps %zu to see "
        "the steady state; if the run is this short in production, warm up (or cache compilation) beforehand.",
        in.analysis.options.warmup_steps + in.stalls.stalled.size());
  }
  if (in.stalls.every_nth > 0) {
    r += absl::StrFormat(" They recur every %zu steps: look for what the loop does every %zu steps.",
                         in.stalls.every_nth, in.stalls.every_nth);
  }
  return r;
}

// "data loading +41.2 ms a step (92% of the growth), OS overhead +2.0 ms (4%)".
std::string GrowthText(const IntermittentStalls& s) {
  const double n = static_cast<double>(s.stalled.size());
  const int64_t positive = s.PositiveStageGrowthNs();
  std::vector<size_t> order;
  for (size_t i = 0; i < kStageCount; ++i) {
    if (s.stage_growth_ns[i] > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return s.stage_growth_ns[x] > s.stage_growth_ns[y]; });
  std::string text;
  for (size_t k = 0; k < order.size() && k < 3; ++k) {
    const size_t i = order[k];
    if (!text.empty()) text += ", ";
    text += absl::StrFormat("%s +%.3f ms a step (%s of the growth)", StageName(static_cast<Stage>(i)),
                            s.stage_growth_ns[i] / 1e6 / n,
                            Pct(positive ? static_cast<double>(s.stage_growth_ns[i]) / positive : 0));
  }
  return text.empty() ? std::string("no stage grew") : text;
}

}  // namespace

std::optional<Finding> IntermittentStallsRule(const DiagnosisInputs& in) {
  const IntermittentStalls& s = in.stalls;
  if (!s.found() || s.share_of_run < kStallCostShare) return std::nullopt;
  const size_t stalled = s.stalled.size();
  const double n = static_cast<double>(stalled);
  uint64_t stalled_ns = 0;
  for (size_t i : s.stalled) stalled_ns += in.analysis.steps[i].duration_ns();
  Finding f;
  f.bottleneck = Bottleneck::kIntermittentStalls;
  f.score = s.share_of_run;
  f.gain = s.share_of_run;
  f.gain_model = "the stalled steps brought to the median step";
  const std::string how_often =
      s.at_start        ? std::string("the first measured steps")
      : s.every_nth > 0 ? absl::StrFormat("every %zu steps", s.every_nth)
                        : absl::StrFormat("about one step in %.0f", std::round(s.steps_considered / n));
  f.evidence = absl::StrFormat(
      "%zu of %zu measured steps (%s) took longer than %.3f ms (median %.3f ms + max(%.0f%%, %.0f robust "
      "standard deviations); p90 %.3f ms): %.3f ms each on average, and their time beyond the median is %s of "
      "the run. What grew in them: %s",
      stalled, s.steps_considered, how_often, s.threshold_ns / 1e6, s.median_ns / 1e6, kStallMinExcess * 100,
      kStallMadFactor, s.p90_ns / 1e6, stalled_ns / 1e6 / n, Pct(s.share_of_run), GrowthText(s));
  if (auto cause = s.MainIdleCause()) {
    f.evidence += absl::StrFormat("; the GPU-idle cause that grew most: %s (+%.3f ms a step)", IdleCauseName(*cause),
                                  s.idle_growth_ns[static_cast<size_t>(*cause)] / 1e6 / n);
  }
  if (!s.explained.empty()) {
    absl::StrAppendFormat(&f.evidence,
                          "; %zu more steps over the threshold started DataLoader workers again and are the "
                          "dataloader_worker_restarts finding's",
                          s.explained.size());
  }
  f.evidence += ".";
  AppendGain(f);
  f.recommendation = StallRecommendation(in, s.MainStage());
  return f;
}

std::optional<Finding> StragglerRule(const DiagnosisInputs& in) {
  const Straggler* s = in.straggler;
  if (s == nullptr || s->others_step_ns <= 0) return std::nullopt;
  Finding f;
  f.bottleneck = Bottleneck::kStraggler;
  f.score = std::min(1.0, s->cost_ns_per_step / s->others_step_ns);
  f.gain = f.score;
  f.gain_model = "the other ranks' wait for it removed from their steps";
  f.evidence = absl::StrFormat(
      "the other ranks waited %.3f ms per step (%s of their %.3f ms step) in collectives for rank %d (pid %u); "
      "its cause: %s (%s)",
      s->cost_ns_per_step / 1e6, Pct(f.score), s->others_step_ns / 1e6, s->rank, s->pid, s->cause, s->cause_detail);
  if (!s->bottleneck.empty()) f.evidence += absl::StrFormat("; its own diagnosis: %s", s->bottleneck);
  f.evidence += ".";
  AppendGain(f);
  if (s->cause == "data_loader") {
    f.recommendation = absl::StrFormat(
        "Make rank %d's input pipeline as fast as the others': more DataLoader workers on it, or move its extra "
        "preprocessing out of the step (precompute it, or balance the work across ranks).", s->rank);
  } else if (s->cause == "preemption") {
    f.recommendation = absl::StrFormat(
        "Rank %d's training thread loses its CPU: pin each rank to its own cores (taskset, numactl) and keep "
        "other work off them; fewer data workers per rank if they oversubscribe the host.", s->rank);
  } else if (s->cause == "page_faults" || s->cause == "mmap_munmap") {
    f.recommendation = absl::StrFormat(
        "Rank %d spends its time in memory management: reuse buffers (pinned, preallocated) instead of "
        "allocating per step, and check the host's memory pressure.", s->rank);
  } else if (s->cause == "thread_waits") {
    f.recommendation = absl::StrFormat(
        "Rank %d's training thread waits on its own threads or a lock, not on more work: see what its wakeup "
        "chains name (the autograd engine, the pin-memory thread, the GIL held by a Python thread) and compare "
        "its threads with the other ranks'.", s->rank);
  } else if (s->cause == "unknown") {
    f.recommendation = absl::StrFormat(
        "Compare rank %d's step with the others' in the per-rank table and its own diagnosis; uneven input "
        "sizes or a slower device are the usual causes.", s->rank);
  } else {
    f.recommendation = absl::StrFormat(
        "Balance the work between ranks: rank %d does more per step than the others (its %s).", s->rank, s->cause);
  }
  return f;
}

const std::vector<DiagnosisRule>& DiagnosisRules() {
  static const std::vector<DiagnosisRule> rules = {
      {Bottleneck::kGpuBound, &GpuBoundRule, /*steady_state=*/true},
      {Bottleneck::kDataLoader, &DataLoaderRule, true},
      {Bottleneck::kPageableCopies, &PageableCopiesRule, true},
      {Bottleneck::kSerializedCopies, &SerializedCopiesRule, true},
      {Bottleneck::kLaunchBound, &LaunchBoundRule, true},
      {Bottleneck::kHostCpuWork, &HostCpuWorkRule, true},
      {Bottleneck::kWorkerProcesses, &WorkerProcessesRule, true},
      {Bottleneck::kAllocatorChurn, &AllocatorChurnRule, true},
      {Bottleneck::kWorkerRestarts, &WorkerRestartRule, true},
      {Bottleneck::kCpuContention, &CpuContentionRule, true},
      {Bottleneck::kStraggler, &StragglerRule, true},
      {Bottleneck::kIntermittentStalls, &IntermittentStallsRule, /*steady_state=*/false},
  };
  return rules;
}

}  // namespace gpuos
