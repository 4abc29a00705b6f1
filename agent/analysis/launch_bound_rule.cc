// The launch_bound rule; see diagnosis.h for what it tests, scores and
// gains.  What it recommends depends on what the job already does: graphs
// replayed (what is left), syncs between launches (they come first: a graph
// cannot span one), or neither; and it judges the GPU idle besides the
// allocator's churn, which no graph removes.
#include "absl/strings/str_format.h"
#include "analysis/diagnosis.h"
#include "analysis/diagnosis_rule_support.h"

namespace gpuos {
namespace {

using namespace rule_support;

// The step already replays CUDA graphs: what is left is the launches still
// outside them, and the CPU work between replays.
void AdviseWithGraphsInUse(const DiagnosisInputs& in, double idle, Finding& f) {
  const JobPractices& p = in.analysis.practices;
  if (p.kernel_launches > 0) {
    const double outside = static_cast<double>(p.kernel_launches) / (p.graph_launches + p.kernel_launches);
    f.gain = in.Share(in.Idle(IdleCause::kLaunching)) * outside;
    f.gain_model =
        "the GPU idle inside the kernel launch calls still outside the CUDA graphs (their share of the launch "
        "calls) removed by capturing them too; the CPU work between replays is not counted";
  } else {
    f.gain_model =
        "not estimated: every launch is already a graph replay; what is left is the CPU work between "
        "replays, which the trace cannot say how much a fuller capture or a larger batch would shorten";
  }
  f.evidence += absl::StrFormat(
      "; the step already replays CUDA graphs: %.1f graph launches and %.1f other kernel launches per step, "
      "%s of kernels ran from graphs.",
      in.PerStep(p.graph_launches), in.PerStep(p.kernel_launches), Pct(Share(p.graph_kernels, p.kernels)));
  AppendGain(f);
  f.recommendation = absl::StrFormat(
      "The step is already replayed from CUDA graphs (torch.compile mode=\"reduce-overhead\" or graph "
      "capture), so per-kernel launch cost is mostly gone. What is left: the GPU is idle %s of step time, "
      "%s of step time while the thread runs other code (Python, the optimizer, the framework) and %s in other "
      "CUDA calls between replays%s. Capture more of the step (the optimizer step too; no graph breaks, "
      "torch.compile(fullgraph=True)), move CPU work out of the loop, or raise the batch size so each replay "
      "does more work.",
      Pct(idle), Pct(in.Share(in.Idle(IdleCause::kOtherCpu))), Pct(in.Share(in.Idle(IdleCause::kOtherCudaApi))),
      p.kernel_launches > 0
          ? absl::StrFormat(", and %.1f kernel launches per step are still outside the graphs",
                            in.PerStep(p.kernel_launches))
          : std::string());
}

// The step waits for the GPU between its launches: a graph captures only
// the stretches between those syncs, so the graph lever waits for them.
void AdviseWithSyncsBetweenLaunches(const DiagnosisInputs& in, double syncs, double graph_gain, Finding& f) {
  f.gain = graph_gain;
  f.gain_model = absl::StrFormat(
      "once the %.1f syncs per step between launches are gone, a CUDA graph replay cuts the GPU idle spent "
      "waiting on the CPU by %.0f%%; while they remain, a graph captures only the stretches between them",
      syncs, kGraphIdleReduction * 100);
  f.evidence += absl::StrFormat(
      "; the thread also waited for the GPU %.1f times per step between its launches, and the GPU sat idle "
      "after those waits %s of step time.",
      syncs, Pct(in.Share(in.total().gpu.idle_after_sync_ns)));
  AppendGain(f);
  f.recommendation = absl::StrFormat(
      "The GPU waits for the CPU to issue work, and the step waits for the GPU %.1f times between its launches: "
      "a value or a size read back mid-step (.item(), .cpu(), nonzero or torch.where(cond), boolean-mask "
      "indexing, shapes that depend on data). A CUDA graph or torch.compile(mode=\"reduce-overhead\") captures "
      "only the stretches between such syncs, so first remove those the step can do without "
      "(torch.cuda.set_sync_debug_mode(\"warn\") names each one; keep shapes fixed, as a capacity-bounded "
      "dispatch does, and read values back once a step); then capture the step, fuse kernels with "
      "torch.compile, or raise the batch size so each kernel does more work.",
      syncs);
}

void AdviseEager(double graph_gain, Finding& f) {
  f.gain = graph_gain;
  f.gain_model = absl::StrFormat(
      "a CUDA graph replay cuts the GPU idle spent waiting on the CPU (launch calls, other CUDA calls, "
      "framework code) by %.0f%%",
      kGraphIdleReduction * 100);
  f.evidence += ".";
  AppendGain(f);
  f.recommendation =
      "The GPU waits for the CPU to issue work: capture the step in a CUDA graph, use torch.compile "
      "(mode=\"reduce-overhead\") to fuse kernels and cut launches, or raise the batch size so each kernel "
      "does more work.";
}

// Below this share of step time the churn's idle is not worth a clause.
constexpr double kChurnNoteShare = 0.01;

}  // namespace

std::optional<Finding> LaunchBoundRule(const DiagnosisInputs& in) {
  std::optional<Finding> f = LaunchBoundRuleAt(in, kGpuIdleHighShare);
  if (f && in.Share(IdleBesidesChurn(in).idle_ns) < kGpuIdleHighShare * (1 + kNearThresholdFraction)) {
    f->near_threshold = true;
    f->evidence += absl::StrFormat(
        " The GPU idle is within %.0f%% of the %.0f%% from which the step reads launch-bound: another run of the "
        "job may not.",
        kNearThresholdFraction * 100, kGpuIdleHighShare * 100);
  }
  return f;
}

std::optional<Finding> LaunchBoundRuleAt(const DiagnosisInputs& in, double idle_share) {
  const StepRecord& t = in.total();
  const IdleWithoutChurn judged = IdleBesidesChurn(in);
  const uint64_t cpu_idle = judged.cpu_side_ns;
  const double idle = in.Share(judged.idle_ns);
  // Compute kernels only: a collective's kernel lasts as long as it waits
  // for the other ranks, which says nothing of how short the work is.
  const uint64_t kernels = t.gpu.compute_kernels_started();
  const double mean_kernel_ns = kernels ? static_cast<double>(t.gpu.compute_kernels_started_ns()) / kernels : 0;
  const double kernels_per_step = in.PerStep(kernels);
  if (idle < idle_share || Share(cpu_idle, judged.idle_ns) < kLaunchBoundCpuFraction || kernels == 0 ||
      mean_kernel_ns > kShortKernelNs || kernels_per_step < kMinKernelsPerStep) {
    return std::nullopt;
  }
  Finding f;
  f.bottleneck = Bottleneck::kLaunchBound;
  f.score = in.Share(cpu_idle);
  f.evidence = absl::StrFormat(
      "the GPU was idle %s of step time; while it was idle the launching thread was in launch calls %s, other "
      "CUDA calls %s and running other code %s of step time; %.0f kernels per step averaging %.1f us%s, "
      "%.0f launch calls per step taking %s of step time",
      Pct(idle), Pct(in.Share(in.Idle(IdleCause::kLaunching))), Pct(in.Share(in.Idle(IdleCause::kOtherCudaApi))),
      Pct(in.Share(in.Idle(IdleCause::kOtherCpu))), kernels_per_step, mean_kernel_ns / 1e3,
      t.gpu.comm_kernels_started == 0
          ? std::string()
          : absl::StrFormat(" (besides %.1f collectives' kernels)", in.PerStep(t.gpu.comm_kernels_started)),
      in.PerStep(t.api.launch), Pct(in.Share(t.cpu.launch_api_ns)));
  if (in.Share(judged.churn_ns) >= kChurnNoteShare) {
    f.evidence += absl::StrFormat(
        "; besides that idle, the GPU sat idle %s of step time inside the thread's allocation calls or in the "
        "stretches that began in them, which no CUDA graph removes (allocator churn)",
        Pct(in.Share(judged.churn_ns)));
  }
  if (const uint64_t host = in.Idle(IdleCause::kHostWork); host > 0) {
    f.evidence += absl::StrFormat("; not counted here: %s of step time the thread %s, which no CUDA graph shortens",
                                  Pct(in.Share(host)), HostWorkText());
  }
  // Eager: CUDA graphs cut the GPU idle spent waiting on the CPU.
  const double graph_gain = f.score * kGraphIdleReduction;
  if (in.analysis.practices.GraphsInUse(in.steps())) {
    AdviseWithGraphsInUse(in, idle, f);
  } else if (const double syncs = in.analysis.SyncsBetweenLaunchesPerStep(); syncs >= kStepSplittingSyncs) {
    AdviseWithSyncsBetweenLaunches(in, syncs, graph_gain, f);
  } else {
    AdviseEager(graph_gain, f);
  }
  if (AllocatorChurnComesFirst(in)) {
    f.recommendation =
        "First remove the allocator churn (its finding): the step's frees drain the GPU's queue every step, so "
        "the CPU starts each step with no lead over the GPU and part of this idle may go with them; trace again "
        "before capturing graphs. " +
        f.recommendation;
  }
  return f;
}

}  // namespace gpuos
