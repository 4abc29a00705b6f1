// The allocator_churn rule; see diagnosis.h for what it tests, scores and
// gains.  PyTorch's caching allocator asks the driver for memory only when
// its cache cannot serve a request, so a steady step makes no cudaMalloc or
// cudaFree.  One that does every step has its cache emptied
// (torch.cuda.empty_cache() in the loop) or runs at its memory limit, where
// the allocator frees its whole cache and retries.  A cudaFree waits for the
// device: the GPU's queue runs dry and the GPU then waits for the CPU to
// fill it again, so the cost is more than the calls' own time.
#include "absl/strings/str_format.h"
#include "analysis/diagnosis.h"
#include "analysis/diagnosis_rule_support.h"

namespace gpuos {

using rule_support::Pct;

namespace {

// Of the measured steps, the share that made an allocation call: a job
// whose allocator grows in its first steps, or that empties its cache every
// hundred steps, has many calls in a few steps (the intermittent-stalls
// finding's), not churn.
double ShareOfStepsAllocating(const StepAnalysis& a) {
  size_t measured = 0, allocating = 0;
  for (const StepRecord& s : a.steps) {
    if (!a.InSummaries(s)) continue;
    ++measured;
    if (s.api.allocations > 0) ++allocating;
  }
  return measured ? static_cast<double>(allocating) / measured : 0.0;
}

bool Churns(const DiagnosisInputs& in) {
  return in.analysis.AllocationsPerStep() >= kChurnAllocationsPerStep &&
         in.Share(in.total().gpu.idle_allocation_ns) >= kAllocatorChurnShare &&
         ShareOfStepsAllocating(in.analysis) >= kChurnStepShare;
}

bool DrainsEveryStep(const DiagnosisInputs& in) {
  return in.total().gpu.idle_stretches_after_allocation >= in.steps();
}

}  // namespace

bool AllocatorChurnComesFirst(const DiagnosisInputs& in) { return Churns(in) && DrainsEveryStep(in); }

std::optional<Finding> AllocatorChurnRule(const DiagnosisInputs& in) {
  if (!Churns(in)) return std::nullopt;
  const StepRecord& t = in.total();
  const double calls = in.analysis.AllocationsPerStep();
  const double idle = in.Share(t.gpu.idle_allocation_ns);
  Finding f;
  f.bottleneck = Bottleneck::kAllocatorChurn;
  f.score = idle;
  f.gain = idle;
  f.gain_model =
      "at least the GPU idle inside the allocation calls and in the idle stretches that began in them, which a "
      "cache that keeps its memory removes; each free also takes the CPU's lead over the GPU, so part of the "
      "CPU-side idle later in the step may go too";
  f.evidence = absl::StrFormat(
      "the launching thread took memory from the driver or gave it back %.1f times per step (cudaMalloc, "
      "cudaFree and kin), %s of step time in those calls; the GPU was idle %s of step time inside them or in "
      "idle stretches that began inside them (%u stretches: a free waits for the GPU's queue to run dry, then the "
      "GPU waits for the CPU to fill it), of %s GPU idle in all.",
      calls, Pct(in.Share(t.cpu.allocate_api_ns)), Pct(idle), t.gpu.idle_stretches_after_allocation,
      Pct(in.Share(t.gpu.idle_ns)));
  rule_support::AppendGain(f);
  if (DrainsEveryStep(in)) {
    const double cpu_side = in.Share(rule_support::IdleBesidesChurn(in).cpu_side_ns);
    f.evidence += absl::StrFormat(
        " The frees drained the GPU's queue every step (%.1f times per step), so the CPU started each step with "
        "no lead over the GPU: the gain may reach %s if the CPU-side idle besides the churn's (%s of step time) "
        "goes with it. Fix this first and trace again.",
        in.PerStep(t.gpu.idle_stretches_after_allocation), Pct(idle + cpu_side), Pct(cpu_side));
  }
  f.recommendation =
      "The caching allocator hands memory back to the driver and takes it again every step. Remove "
      "torch.cuda.empty_cache() (and gc.collect()) from the training loop: the allocator reuses what it keeps. "
      "If the job runs near its memory limit, the allocator frees its cache and retries "
      "(torch.cuda.memory_stats()[\"num_alloc_retries\"] counts it): lower the peak (smaller micro-batches with "
      "gradient accumulation, activation checkpointing), set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
      "against fragmentation, and pad varying shapes to a few fixed lengths.";
  return f;
}

}  // namespace gpuos
