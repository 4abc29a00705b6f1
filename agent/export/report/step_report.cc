// The step analysis as text tables; see report/step_report.h (the JSON
// members are in step_json.cc).
#include "export/report/step_report.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/cuda_summary.h"
#include "export/report/format.h"
#include "export/report/step_columns.h"
#include "export/report/sync_drain_text.h"
#include "export/report/text_table.h"
#include "export/report/wait_chain_text.h"

namespace gpuos {
namespace {

void StepTable(const StepAnalysis& a, std::ostream& out, size_t max_steps) {
  const std::vector<StepColumn>& columns = StepColumns();
  std::vector<TextTable::Column> titles = {{"step"}};
  for (const StepColumn& c : columns) titles.push_back({c.title});
  TextTable table(titles);
  for (size_t i = 0; i < a.steps.size() && i < max_steps; ++i) {
    const StepRecord& s = a.steps[i];
    std::vector<std::string> cells = {absl::StrFormat("%d%s", s.index, s.warmup ? "*" : s.window_start ? "+" : "")};
    for (const StepColumn& c : columns) {
      cells.push_back(HasValue(c, s) ? StepCell(c, c.value(s), /*statistic=*/false) : "-");
    }
    table.AddRow(std::move(cells));
  }
  table.AddRule();
  std::vector<std::vector<double>> values(columns.size());
  for (const StepRecord& s : a.steps) {
    if (s.warmup && !a.summary_includes_warmup) continue;
    for (size_t c = 0; c < columns.size(); ++c) {
      if (InColumnStats(columns[c], s)) values[c].push_back(columns[c].value(s));
    }
  }
  std::vector<DistributionStats> stats;
  for (auto& v : values) stats.push_back(Distribution(std::move(v)));
  for (auto [name, field] : {std::pair<const char*, double DistributionStats::*>{"mean", &DistributionStats::mean},
                             {"p50", &DistributionStats::p50},
                             {"p95", &DistributionStats::p95}}) {
    std::vector<std::string> cells = {name};
    for (size_t c = 0; c < columns.size(); ++c) {
      cells.push_back(stats[c].count ? StepCell(columns[c], stats[c].*field, /*statistic=*/true) : "-");
    }
    table.AddRow(std::move(cells));
  }
  out << "\nSteps (ms of the launching thread's wall time; * = warmup; mean/p50/p95 over measured steps)\n";
  table.Render(out, "  ");
  if (a.steps.size() > max_steps) {
    out << "  (" << a.steps.size() - max_steps << " more steps not shown; the JSON report lists every step)\n";
  }
  out << "  data/sync/copy/launch/cuda other/other partition the step (CPU side); GPU kern/comm/copy/idle: the\n"
         "  GPU running a compute kernel / only collectives (NCCL) / only copies / nothing; inv sw: involuntary\n"
         "  switches of the launching thread.\n";
  if (a.capture.in_use()) {
    out << "  sync/copy/launch/cuda other/other, GPU kern/comm/copy/idle and kernels need CUDA detail: '-' in steps\n"
           "  without it, and their mean/p50/p95 are over the steps with it";
    out << (a.window_start_steps > 0 ? " but the window starts (+: the first step of a\n"
                                       "  window that subscribed CUPTI again, which that cost).\n"
                                     : ".\n");
  }
}

// " (over the N steps with CUDA detail)" when the GPU side covers fewer
// steps than the OS side; else nothing.
std::string DetailStepsNote(const StepAnalysis& a) {
  if (!GpuSideOverFewerSteps(a)) return "";
  return absl::StrFormat(" (over the %d steps with CUDA detail%s)", a.measured_steps, WindowStartsLeftOut(a));
}

void StageTable(const StepAnalysis& a, std::ostream& out) {
  TextTable table({{"stage", TextTable::Align::kLeft}, {"mean %"}, {"p50 %"}, {"p95 %"}, {"total ms"}, {"% of total"}});
  for (size_t i = 0; i < kStageCount; ++i) {
    const DistributionStats& d = a.stage_share[i];
    const uint64_t total = a.measured_total.stages[i];
    table.AddRow({StageName(static_cast<Stage>(i)), FormatPct1(d.mean), FormatPct1(d.p50), FormatPct1(d.p95),
                  FormatMs3(total), FormatPct1(Share(total, a.measured_wall_ns))});
  }
  out << "\nWhere step time went (stages; each instant counted once; all but GPU compute and communication\n"
         "are time the GPU ran no kernel)"
      << DetailStepsNote(a) << "\n";
  table.Render(out, "  ");
  // Only where block I/O was recorded and waited for.
  const StageTimes disk = DiskPartOfStages(a.measured_total);
  std::vector<std::string> parts;
  for (size_t i = 0; i < kStageCount; ++i) {
    if (disk[i] == 0) continue;
    parts.push_back(absl::StrFormat("%s %s ms (%s%% of the stage)", StageName(static_cast<Stage>(i)),
                                    FormatMs3(disk[i]), FormatPct1(Share(disk[i], a.measured_total.stages[i]))));
  }
  if (!parts.empty()) {
    out << "  waiting for disk (the driving thread's own block I/O, or a thread it waited on blocked on its own):\n"
        << "    " << absl::StrJoin(parts, "; ") << "\n";
  }
}

void IdleTable(const StepAnalysis& a, std::ostream& out) {
  const StepRecord& t = a.measured_total;
  out << "\nGPU idle time by what the driving thread was doing: " << FormatMs3(t.gpu.idle_ns) << " of "
      << FormatMs3(a.measured_wall_ns) << " ms (" << FormatPct1(Share(t.gpu.idle_ns, a.measured_wall_ns)) << "%), "
      << t.gpu.idle_stretches << " stretches, longest " << FormatMs3(t.gpu.longest_idle_ns) << " ms"
      << DetailStepsNote(a) << "\n";
  if (t.gpu.idle_ns == 0) return;
  TextTable table({{"cause", TextTable::Align::kLeft}, {"ms"}, {"ms/step"}, {"% of idle"}, {"% of step"}});
  std::vector<size_t> order;
  for (size_t i = 0; i < kIdleCauseCount; ++i) {
    if (t.gpu_idle[i]) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return t.gpu_idle[x] > t.gpu_idle[y]; });
  for (size_t i : order) {
    table.AddRow({IdleCauseName(static_cast<IdleCause>(i)), FormatMs3(t.gpu_idle[i]),
                  FormatMs3(static_cast<double>(t.gpu_idle[i]) / a.measured_steps),
                  FormatPct1(Share(t.gpu_idle[i], t.gpu.idle_ns)),
                  FormatPct1(Share(t.gpu_idle[i], a.measured_wall_ns))});
  }
  table.Render(out, "  ");
  if (const std::string drain = SyncDrainText(a); !drain.empty()) out << "  " << drain << "\n";
  if (const std::string drain = AllocationDrainText(a); !drain.empty()) out << "  " << drain << "\n";
  // Who ended the driving thread's waits, and what they were doing.
  bool header = false;
  for (size_t i : order) {
    const std::string chain = WaitChainText(a, static_cast<IdleCause>(i));
    if (chain.empty()) continue;
    if (!header) out << "  wakeup chains (who ended the driving thread's waits, and who woke them):\n";
    header = true;
    out << "    " << IdleCauseName(static_cast<IdleCause>(i)) << ": " << chain << "\n";
  }
}

// Block I/O issued per step by role, when any was recorded.
void BlockIoPerStep(const StepRecord& t, double n, std::ostream& out) {
  const StepOsCosts& os = t.os;
  if (os.block_io_launching.requests + os.block_io_workers.requests + os.block_io_others.requests == 0 &&
      t.off_cpu.disk_ns == 0) {
    return;
  }
  auto text = [&](const BlockIoCounts& b) {
    return absl::StrFormat("%.1f requests %.2f MiB %s ms", b.requests / n, b.bytes / n / 1048576.0,
                           FormatMs3(b.ns / n));
  };
  out << "  block I/O issued per step: launching thread " << text(os.block_io_launching) << "; data workers "
      << text(os.block_io_workers) << "; other threads " << text(os.block_io_others) << "\n"
      << "  launching thread blocked on its own block I/O (waiting for disk): " << FormatMs3(t.off_cpu.disk_ns / n)
      << " ms/step\n";
}

// The OS side needs no CUDA detail: over every measured step.
void OsTable(const StepAnalysis& a, std::ostream& out) {
  const StepRecord& t = a.all_steps_total;
  const double n = static_cast<double>(a.all_steps);
  auto per = [&](double v) { return absl::StrFormat("%.1f", v / n); };
  TextTable table({{"role", TextTable::Align::kLeft}, {"vol sw/step"}, {"invol sw/step"}, {"run-queue ms/step"}});
  auto row = [&](std::string name, const SwitchTotals& s) {
    table.AddRow({std::move(name), per(s.voluntary), per(s.involuntary), FormatMs3(s.runqueue_ns / n)});
  };
  row("launching thread", t.os.launching);
  row(WorkerGroupLabel(a), t.os.workers);
  row("other threads", t.os.others);
  out << "\nOS costs per measured step";
  if (GpuSideOverFewerSteps(a)) out << " (over all " << a.all_steps << " measured steps, with CUDA detail or not)";
  out << "\n";
  table.Render(out, "  ");
  const OffCpuParts& o = t.off_cpu;
  out << absl::StrFormat(
      "  launching thread: %s page faults (%s major); mmap %s calls %.2f MiB %s ms; munmap %s calls %.2f MiB %s ms\n"
      "  off-CPU ms/step: futex %s, page faults %s, mmap/munmap %s, other syscalls %s, unknown %s, preempted %s, "
      "run queue %s\n",
      per(t.os.page_faults), per(t.os.major_faults), per(t.os.mmap.calls), t.os.mmap.bytes / n / 1048576.0,
      FormatMs3(t.os.mmap.ns / n), per(t.os.munmap.calls), t.os.munmap.bytes / n / 1048576.0,
      FormatMs3(t.os.munmap.ns / n), FormatMs3(o.futex_ns / n), FormatMs3(o.page_fault_ns / n),
      FormatMs3(o.mmap_munmap_ns / n), FormatMs3(o.syscall_ns / n), FormatMs3(o.unknown_ns / n),
      FormatMs3(o.preempted_ns / n), FormatMs3(o.runqueue_ns / n));
  BlockIoPerStep(t, n, out);
}

std::string GainText(const Finding& f) {
  return f.gain ? absl::StrFormat("gain %s%%", FormatPct1(*f.gain)) : std::string("gain not estimated");
}

void DiagnosisText(const Diagnosis& d, std::ostream& out) {
  out << "\nDiagnosis: " << Printable(d.headline.empty() ? BottleneckTitle(d.primary.bottleneck) : d.headline)
      << "\n";
  if (!d.primary.evidence.empty()) out << "  Evidence: " << Printable(d.primary.evidence) << "\n";
  if (!d.primary.recommendation.empty()) out << "  Recommendation: " << d.primary.recommendation << "\n";
  for (const Finding& f : d.secondary) {
    out << "  Also: " << BottleneckTitle(f.bottleneck) << " (" << FormatPct1(f.score) << "% of step time, "
        << GainText(f) << "): " << f.evidence << "\n        " << f.recommendation << "\n";
  }
}

void CaptureText(const StepAnalysis& a, std::ostream& out) {
  if (!a.capture.in_use()) return;
  const size_t detail = CudaDetailSteps(a);
  out << absl::StrFormat("  capture windows (%s): %d window%s; CUDA detail in %d of %d steps",
                         a.capture.spec.empty() ? "on demand" : Printable(a.capture.spec), a.capture.windows.size(),
                         a.capture.windows.size() == 1 ? "" : "s", detail, a.all_steps);
  if (GpuSideOverFewerSteps(a) && a.window_start_steps > 0) {
    out << absl::StrFormat(
        "; the GPU side below (stages, GPU idle, GPU and CUDA API columns) is over %d of them%s; step time and "
        "OS costs over all %d\n",
        a.measured_steps, WindowStartsLeftOut(a), a.all_steps);
  } else if (GpuSideOverFewerSteps(a)) {
    out << absl::StrFormat(
        "; the GPU side below (stages, GPU idle, GPU and CUDA API columns) is over those %d, step time and OS "
        "costs over all %d\n",
        a.measured_steps, a.all_steps);
  } else if (detail == 0) {
    out << "; no step has CUDA detail, so GPU parts and GPU idle causes below are empty, not measured\n";
  } else {
    out << "\n";
  }
  if (!a.capture.note.empty()) out << "  " << Printable(a.capture.note) << "\n";
  if (const double slower = DetailStepsSlowdown(a); slower >= kDetailSlowdownToSay) {
    out << absl::StrFormat(
        "  the steps with CUDA detail took %s%% longer than the job's steps (p50 %s ms against %s ms): CUPTI's\n"
        "  records slow the job inside windows, so the GPU side below is the job as it ran then\n",
        FormatPct1(slower), FormatMs3(a.duration_ns.p50), FormatMs3(a.all_steps_duration_ns.p50));
  }
}

// An attached trace whose steps hold less than kLowAttachCoverage of the
// window: what the figures leave out, said before them.
void CoverageText(const StepAnalysis& a, std::ostream& out) {
  const std::optional<AttachCoverage> c = a.Coverage();
  if (!c || c->Share() >= kLowAttachCoverage) return;
  out << absl::StrFormat(
      "  the steps hold %.3f s of the %.3f s attach window (%s%%): %.3f s before the first step, %.3f s after the "
      "last; what the job did then (a stall, an evaluation, workers starting) is in none of the figures below\n",
      c->in_steps_ns / 1e9, c->window_ns / 1e9, FormatPct1(c->Share()), c->before_first_ns / 1e9,
      c->after_last_ns / 1e9);
}

}  // namespace

void WriteStepTextReport(const StepAnalysis& a, const Diagnosis& d, std::ostream& out, size_t max_steps) {
  out << "\nTraining steps\n";
  if (!a.has_steps()) {
    out << "  No steps: " << Printable(a.note) << "\n";
    if (!a.read_error.empty()) out << "  (read up to the damage: " << Printable(a.read_error) << ")\n";
    return;
  }
  const size_t warmup = a.steps.size() - (a.summary_includes_warmup ? 0 : a.all_steps);
  out << absl::StrFormat("  %d steps of thread %u \"%s\" (pid %u), from %s", a.steps.size(), a.tid,
                         Printable(a.thread_comm), a.pid, StepSourceText(a.source));
  if (a.summary_includes_warmup) {
    out << "; every step is warmup, so the summaries include them\n";
  } else {
    size_t irregular = 0;
    for (const StepRecord& s : a.steps) irregular += !s.left_out.empty();
    if (irregular == 0) {
      out << absl::StrFormat("; %d warmup step%s left out of the summaries\n", warmup, warmup == 1 ? "" : "s");
    } else {
      out << absl::StrFormat("; %d step%s left out of the summaries (%d differing from the steady iteration)\n",
                             warmup, warmup == 1 ? "" : "s", irregular);
    }
  }
  if (!a.driving_thread_note.empty()) out << "  driving thread: " << Printable(a.driving_thread_note) << "\n";
  if (a.other_threads_with_steps) {
    out << "  " << a.other_threads_with_steps << " other thread(s) also had step ranges; only this one is analyzed\n";
  }
  // Steps nobody annotated: say what marks them, so a reader can judge.
  if (StepSourceIsInferred(a.source) || (a.source == StepSource::kOptimizerSteps && !a.note.empty())) {
    out << "  how: " << Printable(a.note) << "\n";
  }
  // Wall time needs no CUDA detail: over every measured step.
  const DistributionStats& wall = a.all_steps_duration_ns;
  out << absl::StrFormat("  step time over %d measured steps: mean %s ms, p50 %s, p95 %s, min %s, max %s\n",
                         a.all_steps, FormatMs3(wall.mean), FormatMs3(wall.p50), FormatMs3(wall.p95),
                         FormatMs3(wall.min), FormatMs3(wall.max));
  CoverageText(a, out);
  CaptureText(a, out);
  StepTable(a, out, max_steps);
  StageTable(a, out);
  IdleTable(a, out);
  OsTable(a, out);
  DiagnosisText(d, out);
  if (!a.read_error.empty()) out << "  (steps read up to the damage: " << Printable(a.read_error) << ")\n";
}

}  // namespace gpuos
