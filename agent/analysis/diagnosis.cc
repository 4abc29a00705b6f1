// The bottleneck rules; see diagnosis.h for what each one tests.
#include "analysis/diagnosis.h"

#include <algorithm>

#include "absl/strings/str_format.h"

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
    case Bottleneck::kCpuContention: return "cpu_contention";
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
    case Bottleneck::kCpuContention: return "CPU contention (too many workers)";
  }
  return "unknown";
}

namespace {

double Share(uint64_t part, uint64_t whole) { return whole ? static_cast<double>(part) / whole : 0.0; }
std::string Pct(double share) { return absl::StrFormat("%.1f%%", share * 100); }
double PerStep(uint64_t total, size_t steps) { return steps ? static_cast<double>(total) / steps : 0.0; }

uint64_t Idle(const StepRecord& t, IdleCause cause) { return t.gpu_idle[static_cast<size_t>(cause)]; }

}  // namespace

Diagnosis Diagnose(const StepAnalysis& a) {
  Diagnosis d;
  if (!a.has_steps()) {
    d.primary.bottleneck = Bottleneck::kNoSteps;
    d.primary.evidence = a.note;
    d.primary.recommendation =
        "Mark each training step with an NVTX range (e.g. nvtx.annotate(f\"step {i}\")), or pass --step-regex.";
    return d;
  }
  const StepRecord& t = a.measured_total;
  const uint64_t wall = a.measured_wall_ns;
  const size_t n = a.measured_steps;
  const double step_ms = n ? wall / 1e6 / n : 0;
  std::vector<Finding> fired;

  const uint64_t gpu_work = t.gpu.kernel_ns + t.gpu.memcpy_ns + t.gpu.memset_ns;
  const double data_wait = Share(t.cpu.data_wait_ns, wall);
  const double idle = Share(t.gpu.idle_ns, wall);
  const double data_futex = Share(Idle(t, IdleCause::kDataWaitFutex), wall);
  const double idle_in_data = Share(Idle(t, IdleCause::kDataWaitFutex) + Idle(t, IdleCause::kDataWaitBlocked) +
                                        Idle(t, IdleCause::kDataWaitRunning),
                                    wall);
  const std::string workers =
      a.worker_processes == 0 ? std::string("no data worker processes (loading runs in the training thread)")
                              : absl::StrFormat("%u data worker processes", a.worker_processes);

  if (gpu_work == 0) {
    Finding f;
    f.bottleneck = Bottleneck::kNoGpuActivity;
    f.score = 1;
    f.evidence = absl::StrFormat(
        "no kernels, copies or memsets of pid %u in %zu measured steps (%.3f ms each); the launching thread "
        "waited for data %s of step time",
        a.pid, n, step_ms, Pct(data_wait));
    f.recommendation =
        "Check the report's CUDA shim status (CUPTI may be inactive or taken by another profiler), or the job "
        "ran on the CPU; GPU idle time cannot be attributed without GPU records.";
    d.primary = f;
    if (data_wait >= kDataWaitShare) {
      Finding g;
      g.bottleneck = Bottleneck::kDataLoader;
      g.score = data_wait;
      g.evidence = absl::StrFormat("the launching thread waited for data %s of step time; %s", Pct(data_wait), workers);
      g.recommendation = "Load and preprocess batches in more DataLoader worker processes (num_workers).";
      d.secondary.push_back(g);
    }
    return d;
  }

  // GPU-bound.
  const double kernel_share = Share(t.gpu.kernel_busy_ns, wall);
  if (kernel_share >= kGpuBoundKernelShare) {
    Finding f;
    f.bottleneck = Bottleneck::kGpuBound;
    f.score = kernel_share;
    f.evidence = absl::StrFormat(
        "kernels ran %s of step time (GPU idle %s, copies alone %s); mean step %.3f ms, %.0f kernels per step",
        Pct(kernel_share), Pct(idle), Pct(Share(t.gpu.copy_only_ns, wall)), step_ms,
        PerStep(t.gpu.kernels_started, n));
    f.recommendation =
        "The GPU is the bottleneck: optimize the kernels -- mixed precision (AMP, bf16) for Tensor Cores, "
        "torch.compile or fused kernels, channels-last layouts; input-pipeline changes will not help.";
    fired.push_back(f);
  }

  // Data-loader starvation.
  if (data_wait >= kDataWaitShare && idle >= kGpuIdleHighShare) {
    Finding f;
    f.bottleneck = Bottleneck::kDataLoader;
    f.score = Share(t.stages[static_cast<size_t>(Stage::kDataLoading)], wall);
    f.evidence = absl::StrFormat(
        "the launching thread waited for data %s of step time (%.3f of %.3f ms per step); the GPU was idle %s of "
        "step time, %s while the thread waited for data (%s blocked in futex on the loader); %s",
        Pct(data_wait), t.cpu.data_wait_ns / 1e6 / n, step_ms, Pct(idle), Pct(idle_in_data), Pct(data_futex),
        workers);
    f.recommendation =
        a.worker_processes == 0
            ? "Load batches in background worker processes: DataLoader(num_workers=N) with N up to the free CPU "
              "cores, plus prefetch_factor; or make preprocessing cheaper (pre-decoded data, GPU decoding such "
              "as DALI)."
            : absl::StrFormat(
                  "Add DataLoader workers (more than the %u now, while CPU cores are free) and raise "
                  "prefetch_factor, or make preprocessing cheaper (pre-decoded data, GPU decoding such as DALI), "
                  "so the next batch is ready when the GPU finishes the current one.",
                  a.worker_processes);
    fired.push_back(f);
  }

  // Synchronous pageable copies and the munmap after them.
  const double pageable = Share(t.exposed_pageable_copy_ns + t.exposed_mm_ns, wall);
  if (t.api.pageable_memcpy > 0 && pageable >= kPageableShare) {
    Finding f;
    f.bottleneck = Bottleneck::kPageableCopies;
    f.score = pageable;
    f.evidence = absl::StrFormat(
        "with no kernel running, the launching thread sat in cudaMemcpy from/to pageable memory %s of step "
        "time and in mmap/munmap %s (%.1f munmap calls, %.1f MiB per step); %.1f pageable copies per step; "
        "GPU idle %s of step time (%s in pageable memcpy, %s in munmap)",
        Pct(Share(t.exposed_pageable_copy_ns, wall)), Pct(Share(t.exposed_mm_ns, wall)),
        PerStep(t.os.munmap.calls, n), PerStep(t.os.munmap.bytes, n) / 1048576.0,
        PerStep(t.api.pageable_memcpy, n), Pct(idle), Pct(Share(Idle(t, IdleCause::kPageableMemcpy), wall)),
        Pct(Share(Idle(t, IdleCause::kMunmap), wall)));
    f.recommendation =
        "Copy from pinned memory, asynchronously: DataLoader(pin_memory=True) and tensor.to(device, "
        "non_blocking=True). The copy then neither stages through pageable memory nor blocks the thread that "
        "launches the kernels, and the munmap that followed each copy overlaps GPU work instead of stalling it.";
    fired.push_back(f);
  }

  // Copies serialized with compute.
  const double copy_only = Share(t.gpu.copy_only_ns, wall);
  const double same_stream = Share(t.gpu.htod_on_kernel_stream_ns, t.gpu.htod_ns);
  const double overlap = Share(t.gpu.copy_overlap_ns, t.gpu.memcpy_ns);
  // Below kSerializedCopyShare the copies must cost every step (the median
  // step's copy-only share), not a few: a handful of stalled steps must not
  // hide a copy that serializes with compute in all of them, nor fake one.
  std::vector<double> step_copy_only;
  for (const StepRecord& s : a.steps) {
    if (!s.warmup && s.duration_ns() > 0) step_copy_only.push_back(Share(s.gpu.copy_only_ns, s.duration_ns()));
  }
  double median_copy_only = 0;
  if (!step_copy_only.empty()) {
    std::nth_element(step_copy_only.begin(), step_copy_only.begin() + step_copy_only.size() / 2,
                     step_copy_only.end());
    median_copy_only = step_copy_only[step_copy_only.size() / 2];
  }
  const bool copies_every_step =
      copy_only >= kSerializedCopyBusyGpuShare && median_copy_only >= kSerializedCopyBusyGpuShare;
  bool serialized_fired = false;
  if ((copy_only >= kSerializedCopyShare || copies_every_step) &&
      (same_stream >= kSameStreamFraction || overlap < kCopyOverlapFraction)) {
    serialized_fired = true;
    Finding f;
    f.bottleneck = Bottleneck::kSerializedCopies;
    f.score = copy_only;
    f.evidence = absl::StrFormat(
        "the GPU copied with no kernel running %s of step time (%s in the median step; GPU idle %s, kernels "
        "%s); only %s of copy time overlapped a kernel; %s of host-to-device copy time was on streams that "
        "also ran the kernels; overlapping the copies with compute can shorten the step by up to %s",
        Pct(copy_only), Pct(median_copy_only), Pct(idle), Pct(kernel_share), Pct(overlap), Pct(same_stream),
        Pct(copy_only));
    f.recommendation =
        "Overlap copies with compute: copy the next batch on a separate CUDA stream (a prefetcher) while the "
        "current one computes, from pinned memory with non_blocking=True, and make the compute stream wait on "
        "the copy stream.";
    fired.push_back(f);
  }

  // Launch-bound.
  const uint64_t cpu_idle =
      Idle(t, IdleCause::kLaunching) + Idle(t, IdleCause::kOtherCpu) + Idle(t, IdleCause::kOtherCudaApi);
  const double mean_kernel_ns = t.gpu.kernels_started ? static_cast<double>(t.gpu.kernels_started_ns) /
                                                            t.gpu.kernels_started
                                                      : 0;
  const double kernels_per_step = PerStep(t.gpu.kernels_started, n);
  if (idle >= kLaunchBoundIdleShare && Share(cpu_idle, t.gpu.idle_ns) >= kLaunchBoundCpuFraction &&
      t.gpu.kernels_started > 0 && mean_kernel_ns <= kShortKernelNs && kernels_per_step >= kMinKernelsPerStep) {
    Finding f;
    f.bottleneck = Bottleneck::kLaunchBound;
    f.score = Share(cpu_idle, wall);
    f.evidence = absl::StrFormat(
        "the GPU was idle %s of step time; while it was idle the launching thread was in launch calls %s, other "
        "CUDA calls %s and running other code %s of step time; %.0f kernels per step averaging %.1f us, "
        "%.0f launch calls per step taking %s of step time",
        Pct(idle), Pct(Share(Idle(t, IdleCause::kLaunching), wall)),
        Pct(Share(Idle(t, IdleCause::kOtherCudaApi), wall)), Pct(Share(Idle(t, IdleCause::kOtherCpu), wall)),
        kernels_per_step, mean_kernel_ns / 1e3, PerStep(t.api.launch, n), Pct(Share(t.cpu.launch_api_ns, wall)));
    f.recommendation =
        "The GPU waits for the CPU to issue work: capture the step in a CUDA graph, use torch.compile "
        "(mode=\"reduce-overhead\") to fuse kernels and cut launches, or raise the batch size so each kernel "
        "does more work.";
    fired.push_back(f);
  }

  // CPU contention.
  const double contention = Share(t.off_cpu.preempted_ns + t.off_cpu.runqueue_ns, wall);
  if (contention >= kContentionShare && a.worker_processes >= kManyWorkers) {
    Finding f;
    f.bottleneck = Bottleneck::kCpuContention;
    f.score = contention;
    f.evidence = absl::StrFormat(
        "the launching thread was preempted or waited for a CPU %s of step time (%.1f involuntary switches per "
        "step); %u data worker processes made %.1f involuntary switches per step",
        Pct(contention), PerStep(t.os.launching.involuntary, n), a.worker_processes,
        PerStep(t.os.workers.involuntary, n));
    f.recommendation = absl::StrFormat(
        "Too many workers compete with the training thread for CPUs: lower num_workers (now %u), keep each "
        "worker single-threaded (torch.set_num_threads(1), OMP_NUM_THREADS=1), or pin the trainer to a core of "
        "its own.",
        a.worker_processes);
    fired.push_back(f);
  }

  std::stable_sort(fired.begin(), fired.end(), [](const Finding& x, const Finding& y) { return x.score > y.score; });
  // A busy GPU that also sits in serialized copies: hiding the copies is
  // the next step, optimizing kernels the one after (see diagnosis.h).
  if (serialized_fired) {
    auto gpu = std::find_if(fired.begin(), fired.end(),
                            [](const Finding& f) { return f.bottleneck == Bottleneck::kGpuBound; });
    auto copies = std::find_if(fired.begin(), fired.end(),
                               [](const Finding& f) { return f.bottleneck == Bottleneck::kSerializedCopies; });
    if (gpu != fired.end() && copies != fired.end() && gpu < copies) {
      gpu->recommendation =
          "Once the copies overlap compute, the GPU is the bottleneck: optimize the kernels -- mixed precision "
          "(AMP, bf16) for Tensor Cores, torch.compile or fused kernels, channels-last layouts.";
      std::rotate(gpu, copies, copies + 1);
    }
  }
  if (fired.empty()) {
    size_t top = 0;
    for (size_t i = 1; i < kStageCount; ++i) {
      if (t.stages[i] > t.stages[top]) top = i;
    }
    d.primary.bottleneck = Bottleneck::kNoneDominant;
    d.primary.score = Share(t.stages[top], wall);
    d.primary.evidence = absl::StrFormat(
        "no rule's threshold was reached; the largest stage is %s at %s of step time; GPU idle %s, kernels %s",
        StageName(static_cast<Stage>(top)), Pct(d.primary.score), Pct(idle), Pct(kernel_share));
    d.primary.recommendation =
        "Look at the stage and GPU-idle tables for the next thing to shorten; the step is not limited by a "
        "single cause.";
    return d;
  }
  d.primary = fired.front();
  d.secondary.assign(fired.begin() + 1, fired.end());
  return d;
}

}  // namespace gpuos
