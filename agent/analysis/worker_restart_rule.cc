// The dataloader_worker_restarts rule; see diagnosis.h for what it tests,
// scores and gains.  A DataLoader without persistent_workers ends its
// workers when an epoch's iterator is exhausted and starts new ones at the
// next epoch's iter(): the first batch of every epoch waits for them to
// start and fill their queues.  Forked, that costs tens of milliseconds a
// worker; with the spawn start method (set for CUDA in torch.multiprocessing
// jobs, the default on macOS and Windows) every worker is a new interpreter
// importing torch: seconds.  Short epochs (small data sets, frequent
// evaluation) pay it often.
#include "analysis/worker_restarts.h"

#include "absl/strings/str_format.h"
#include "analysis/diagnosis.h"
#include "analysis/diagnosis_rule_support.h"

namespace gpuos {

using rule_support::Pct;

WorkerRestarts WorkerRestartsThatCount(const DiagnosisInputs& in) {
  const WorkerRestarts r = FindWorkerRestarts(in.analysis);
  if (r.steps == 0 || in.Share(r.excess_ns) < kWorkerRestartShare || in.analysis.WorkersAreNotADataLoaders()) {
    return WorkerRestarts{};
  }
  return r;
}

std::optional<Finding> WorkerRestartRule(const DiagnosisInputs& in) {
  const WorkerRestarts r = WorkerRestartsThatCount(in);
  if (r.steps == 0) return std::nullopt;
  const double share = in.Share(r.excess_ns);
  Finding f;
  f.bottleneck = Bottleneck::kWorkerRestarts;
  f.score = share;
  f.gain = share;
  f.gain_model = "the steps that started the workers again brought to the median of the others";
  f.evidence = absl::StrFormat(
      "%zu of %zu measured steps started worker processes again (%u started in those steps: a DataLoader's "
      "iterator made anew, at an epoch's start, without persistent_workers); those steps took %.3f ms on "
      "average against a median of %.3f ms for the others: %s of step time beyond them (their data loading: "
      "%s of step time)%s.",
      r.steps, in.steps(), r.starts, r.step_ns / 1e6 / r.steps, r.median_other_ns / 1e6, Pct(share),
      Pct(in.Share(r.data_stage_ns)),
      r.execs > 0 ? absl::StrFormat("; %u of the workers exec'd a new interpreter (the spawn start method), which "
                                    "imports torch before its first batch",
                                    r.execs)
                  : std::string());
  rule_support::AppendGain(f);
  f.recommendation =
      "Keep the workers across epochs: DataLoader(..., persistent_workers=True) (with num_workers > 0). Each "
      "epoch's iter() then reuses them instead of starting new ones.";
  if (r.execs > 0) {
    f.recommendation +=
        " Started with spawn, each worker is a new Python process importing torch; where the workers use no "
        "CUDA, DataLoader(multiprocessing_context=\"fork\") also starts them faster.";
  }
  return f;
}

}  // namespace gpuos
