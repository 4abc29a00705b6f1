// Runs reduced to scenario-table numbers, deltas and the knee; see
// run_comparison.h.
#include "analysis/run_comparison.h"

#include <cmath>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/ms_text.h"
#include "analysis/step_name_matcher.h"

namespace gpuos {
namespace {

RoleSwitches PerStep(const SwitchTotals& totals, double n) {
  RoleSwitches r;
  r.switches = static_cast<double>(totals.voluntary + totals.involuntary) / n;
  r.involuntary = static_cast<double>(totals.involuntary) / n;
  r.runqueue_ns = static_cast<double>(totals.runqueue_ns) / n;
  return r;
}

// Processes descending from `root` (not `root` itself), by ppid.
std::map<uint32_t, bool> DescendantsOf(const OsSummary& os, uint32_t root) {
  std::map<uint32_t, uint32_t> parent;
  for (const ProcessSummary& p : os.processes) parent[p.pid] = p.ppid;
  std::map<uint32_t, bool> result;
  for (const ProcessSummary& p : os.processes) {
    uint32_t at = p.ppid;
    // Bounded walk: a damaged trace could hold a ppid cycle.
    for (size_t hops = 0; hops < parent.size() && at != 0; ++hops) {
      if (at == root) {
        result[p.pid] = p.pid != root;
        break;
      }
      auto it = parent.find(at);
      if (it == parent.end()) break;
      at = it->second;
    }
  }
  return result;
}

}  // namespace

std::optional<uint64_t> BatchSizeFromCommand(const std::vector<std::string>& argv) {
  std::optional<uint64_t> found;
  for (size_t i = 0; i < argv.size(); ++i) {
    for (const char* flag : {"--batch-size", "--batch_size", "--bs"}) {
      const std::string name = flag;
      std::string value;
      if (argv[i] == name && i + 1 < argv.size()) {
        value = argv[i + 1];
      } else if (argv[i].rfind(name + "=", 0) == 0) {
        value = argv[i].substr(name.size() + 1);
      } else {
        continue;
      }
      uint64_t n = 0;
      if (absl::SimpleAtoi(value, &n) && n > 0) found = n;
    }
  }
  return found;
}

namespace {

// Whole-trace totals, per step found.
void AddWholeTraceTotals(const TraceSummary& summary, const StepAnalysis& steps, RunFacts& run) {
  const double found = static_cast<double>(steps.steps.size());
  std::map<uint32_t, bool> descendants = DescendantsOf(summary.os, steps.pid);
  auto worker_comm = StepNameMatcher::Create(steps.options.worker_comm_regex, "worker comm regex");
  uint64_t futex_calls = 0, futex_ns = 0, worker_faults = 0;
  for (const ProcessSummary& p : summary.os.processes) {
    const bool worker_process = descendants[p.pid];
    for (const ThreadSummary& t : p.threads) {
      futex_calls += t.futex_wait.calls;
      futex_ns += t.futex_wait.total_ns;
      if (worker_process || (worker_comm.ok() && worker_comm->Matches(t.comm))) worker_faults += t.page_faults;
    }
  }
  run.os.futex_waits = static_cast<double>(futex_calls) / found;
  run.os.futex_wait_ns = static_cast<double>(futex_ns) / found;
  run.os.worker_page_faults = static_cast<double>(worker_faults) / found;
  for (const SyscallRow& row : summary.os.syscalls) {
    if (run.top_syscalls.size() == kTopSyscalls) break;
    run.top_syscalls.push_back(
        {row.name, static_cast<double>(row.calls) / found, static_cast<double>(row.total_ns) / found});
  }
}

}  // namespace

RunFacts ReduceRun(const std::string& name, const std::string& path, const TraceSummary& summary,
                   const StepAnalysis& steps, const Diagnosis& diagnosis, std::optional<uint64_t> batch_size) {
  RunFacts run;
  run.name = name;
  run.path = path;
  run.argv.assign(summary.os.header.command_line().begin(), summary.os.header.command_line().end());
  if (!summary.os.read_error.empty()) {
    run.warning = "damaged: " + summary.os.read_error;
  } else if (!summary.os.incomplete_reason.empty()) {
    run.warning = "incomplete: " + summary.os.incomplete_reason;
  } else if (summary.os.dropped_events > 0) {
    run.warning = absl::StrFormat("%d events dropped", summary.os.dropped_events);
  }
  run.has_steps = steps.has_steps();
  run.steps = steps.steps.size();
  run.measured_steps = steps.measured_steps;
  run.step_source = StepSourceName(steps.source);
  run.bottleneck = BottleneckKey(diagnosis.primary.bottleneck);
  run.headline = diagnosis.headline;
  run.gain_pct = diagnosis.primary.gain ? std::optional<double>(*diagnosis.primary.gain * 100) : std::nullopt;
  if (batch_size) {
    run.batch_size = batch_size;
    run.batch_size_source = "given";
  } else if (auto from_command = BatchSizeFromCommand(run.argv)) {
    run.batch_size = from_command;
    run.batch_size_source = "command line";
  }

  const double n = static_cast<double>(steps.measured_steps);
  const double wall = static_cast<double>(steps.measured_wall_ns);
  const StepRecord& total = steps.measured_total;
  if (n > 0 && wall > 0) {
    run.steps_per_s = n * 1e9 / wall;
    if (run.batch_size) run.samples_per_s = run.steps_per_s * static_cast<double>(*run.batch_size);
    run.step_mean_ns = steps.duration_ns.mean;
    run.step_p50_ns = steps.duration_ns.p50;
    run.step_p95_ns = steps.duration_ns.p95;
    for (size_t s = 0; s < kStageCount; ++s) {
      run.stage_ns[s] = static_cast<double>(total.stages[s]) / n;
      run.stage_pct[s] = 100.0 * static_cast<double>(total.stages[s]) / wall;
    }
    for (size_t c = 0; c < kIdleCauseCount; ++c) {
      run.gpu_idle_pct[c] = 100.0 * static_cast<double>(total.gpu_idle[c]) / wall;
    }
    run.gpu_idle_total_pct = 100.0 * static_cast<double>(total.gpu.idle_ns) / wall;
    run.os.driving = PerStep(total.os.launching, n);
    run.os.workers = PerStep(total.os.workers, n);
    run.os.others = PerStep(total.os.others, n);
    run.os.page_faults = static_cast<double>(total.os.page_faults) / n;
    run.os.mmap_calls = static_cast<double>(total.os.mmap.calls) / n;
    run.os.mmap_ns = static_cast<double>(total.os.mmap.ns) / n;
    run.os.munmap_calls = static_cast<double>(total.os.munmap.calls) / n;
    run.os.munmap_ns = static_cast<double>(total.os.munmap.ns) / n;
    run.kernels_per_step = static_cast<double>(total.gpu.kernels_started) / n;
  }

  if (!steps.steps.empty()) AddWholeTraceTotals(summary, steps, run);
  if (summary.cuda.launch_delay.count() > 0) {
    run.launch_delay_p50_ns = summary.cuda.launch_delay.Quantile(0.5);
    run.launch_delay_p95_ns = summary.cuda.launch_delay.Quantile(0.95);
  }
  return run;
}

std::vector<RunDelta> DeltasAgainstFirst(const std::vector<RunFacts>& runs) {
  std::vector<RunDelta> deltas;
  const RunFacts* base = nullptr;
  for (const RunFacts& run : runs) {
    if (!run.analyzed()) continue;
    if (!base) {
      base = &run;
      continue;
    }
    RunDelta d;
    d.name = run.name;
    d.baseline = base->name;
    d.step_mean_ns = run.step_mean_ns - base->step_mean_ns;
    d.step_mean_pct = 100.0 * d.step_mean_ns / base->step_mean_ns;
    d.steps_per_s_pct = base->steps_per_s > 0 ? 100.0 * (run.steps_per_s / base->steps_per_s - 1) : 0;
    size_t largest = 0;
    for (size_t s = 0; s < kStageCount; ++s) {
      d.stage_ns[s] = run.stage_ns[s] - base->stage_ns[s];
      if (std::fabs(d.stage_ns[s]) > std::fabs(d.stage_ns[largest])) largest = s;
    }
    // Below a microsecond per step (or 0.1% of the step) nothing moved.
    const double still = std::max(1000.0, base->step_mean_ns * 0.001);
    const std::string step_change = absl::StrFormat("mean step %s -> %s (%+.1f%%) vs %s", MsText(base->step_mean_ns, 2),
                                                    MsText(run.step_mean_ns, 2), d.step_mean_pct, base->name);
    if (std::fabs(d.step_mean_ns) < still) {
      d.line = absl::StrFormat("%s: %s: unchanged", run.name, step_change);
    } else {
      d.explaining_stage = static_cast<Stage>(largest);
      d.explaining_share_pct = 100.0 * d.stage_ns[largest] / d.step_mean_ns;
      d.line = absl::StrFormat("%s: %s; %s explains %.0f%% of the change (%+.2f ms/step)", run.name, step_change,
                               StageName(*d.explaining_stage), d.explaining_share_pct, d.stage_ns[largest] / 1e6);
      // Stages that moved against each other: name the one that offset it.
      if (d.explaining_share_pct > 150) {
        size_t against = largest;
        for (size_t s = 0; s < kStageCount; ++s) {
          if (d.stage_ns[s] * d.stage_ns[largest] < 0 &&
              (against == largest || std::fabs(d.stage_ns[s]) > std::fabs(d.stage_ns[against]))) {
            against = s;
          }
        }
        if (against != largest) {
          d.line += absl::StrFormat(", mostly offset by %s (%+.2f ms/step)", StageName(static_cast<Stage>(against)),
                                    d.stage_ns[against] / 1e6);
        }
      }
    }
    deltas.push_back(std::move(d));
  }
  return deltas;
}

Knee FindKnee(const std::vector<RunFacts>& runs, double threshold) {
  Knee knee;
  knee.threshold = threshold;
  std::vector<const RunFacts*> analyzed;
  for (const RunFacts& run : runs) {
    if (run.analyzed()) analyzed.push_back(&run);
  }
  if (analyzed.size() < 2) {
    knee.note = "a knee needs at least two runs with measured steps";
    return knee;
  }
  size_t at = analyzed.size();
  for (size_t i = 0; i + 1 < analyzed.size(); ++i) {
    const double improvement = (analyzed[i]->step_mean_ns - analyzed[i + 1]->step_mean_ns) / analyzed[i]->step_mean_ns;
    if (improvement < threshold) {
      at = i;
      knee.next_improvement = improvement;
      break;
    }
  }
  if (at == analyzed.size()) {
    knee.note = absl::StrFormat("the mean step improves by %.0f%% or more at every run up to the last (%s): "
                                "no knee within the values tried",
                                threshold * 100, analyzed.back()->name);
    return knee;
  }
  knee.found = true;
  const RunFacts& k = *analyzed[at];
  const RunFacts& last = *analyzed.back();
  knee.at = k.name;
  if (knee.next_improvement >= 0) {
    knee.note = absl::StrFormat("past %s the mean step improves by %.1f%% (%s -> %s), less than the %.0f%% threshold",
                                k.name, knee.next_improvement * 100, MsText(k.step_mean_ns, 2),
                                MsText(analyzed[at + 1]->step_mean_ns, 2), threshold * 100);
  } else {
    knee.note = absl::StrFormat("past %s the mean step gets longer by %.1f%% (%s -> %s)", k.name,
                                -knee.next_improvement * 100, MsText(k.step_mean_ns, 2), MsText(analyzed[at + 1]->step_mean_ns, 2));
  }
  auto switches = [](const RunFacts& r) {
    return r.os.driving.switches + r.os.workers.switches + r.os.others.switches;
  };
  auto runqueue = [](const RunFacts& r) {
    return r.os.driving.runqueue_ns + r.os.workers.runqueue_ns + r.os.others.runqueue_ns;
  };
  const std::vector<Knee::Growth> candidates = {
      {"context switches per step (all threads)", switches(k), switches(last)},
      {"data-worker context switches per step", k.os.workers.switches, last.os.workers.switches},
      {"involuntary switches per step (all threads)",
       k.os.driving.involuntary + k.os.workers.involuntary + k.os.others.involuntary,
       last.os.driving.involuntary + last.os.workers.involuntary + last.os.others.involuntary},
      {"run-queue ms per step (all threads)", runqueue(k) / 1e6, runqueue(last) / 1e6},
      {"data-worker page faults per step (whole trace)", k.os.worker_page_faults, last.os.worker_page_faults},
      {"driving-thread page faults per step", k.os.page_faults, last.os.page_faults},
      {"futex waits per step (whole trace)", k.os.futex_waits, last.os.futex_waits},
  };
  // Growth of at least 10% counts; smaller moves are within run-to-run noise.
  for (const Knee::Growth& g : candidates) {
    if (g.at_last > g.at_knee * 1.1 && g.at_last > 0) knee.grew.push_back(g);
  }
  return knee;
}

}  // namespace gpuos
