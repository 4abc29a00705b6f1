// Step tables and JSON members; see report/step_report.h.
#include "export/report/step_report.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "analysis/cuda_summary.h"
#include "export/report/format.h"
#include "export/report/step_columns.h"
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
    std::vector<std::string> cells = {absl::StrFormat("%d%s", s.index, s.warmup ? "*" : "")};
    for (const StepColumn& c : columns) cells.push_back(StepCell(c, c.value(s), /*statistic=*/false));
    table.AddRow(std::move(cells));
  }
  table.AddRule();
  std::vector<std::vector<double>> values(columns.size());
  for (const StepRecord& s : a.steps) {
    if (s.warmup && !a.summary_includes_warmup) continue;
    for (size_t c = 0; c < columns.size(); ++c) values[c].push_back(columns[c].value(s));
  }
  std::vector<DistributionStats> stats;
  for (auto& v : values) stats.push_back(Distribution(std::move(v)));
  for (auto [name, field] : {std::pair<const char*, double DistributionStats::*>{"mean", &DistributionStats::mean},
                             {"p50", &DistributionStats::p50},
                             {"p95", &DistributionStats::p95}}) {
    std::vector<std::string> cells = {name};
    for (size_t c = 0; c < columns.size(); ++c) cells.push_back(StepCell(columns[c], stats[c].*field, /*statistic=*/true));
    table.AddRow(std::move(cells));
  }
  out << "\nSteps (ms of the launching thread's wall time; * = warmup; mean/p50/p95 over measured steps)\n";
  table.Render(out, "  ");
  if (a.steps.size() > max_steps) {
    out << "  (" << a.steps.size() - max_steps << " more steps not shown; the JSON report lists every step)\n";
  }
  out << "  data/sync/copy/launch/cuda other/other partition the step (CPU side); GPU kern/copy/idle: the GPU\n"
         "  running a kernel / only copies / nothing; inv sw: involuntary switches of the launching thread.\n";
}

void StageTable(const StepAnalysis& a, std::ostream& out) {
  TextTable table({{"stage", TextTable::Align::kLeft}, {"mean %"}, {"p50 %"}, {"p95 %"}, {"total ms"}, {"% of total"}});
  for (size_t i = 0; i < kStageCount; ++i) {
    const DistributionStats& d = a.stage_share[i];
    const uint64_t total = a.measured_total.stages[i];
    table.AddRow({StageName(static_cast<Stage>(i)), FormatPct1(d.mean), FormatPct1(d.p50), FormatPct1(d.p95),
                  FormatMs3(total), FormatPct1(Share(total, a.measured_wall_ns))});
  }
  out << "\nWhere step time went (stages; each instant counted once; all but GPU compute are time the GPU\n"
         "spent without a kernel)\n";
  table.Render(out, "  ");
}

void IdleTable(const StepAnalysis& a, std::ostream& out) {
  const StepRecord& t = a.measured_total;
  out << "\nGPU idle time by what the driving thread was doing: " << FormatMs3(t.gpu.idle_ns) << " of "
      << FormatMs3(a.measured_wall_ns) << " ms (" << FormatPct1(Share(t.gpu.idle_ns, a.measured_wall_ns)) << "%), "
      << t.gpu.idle_stretches << " stretches, longest " << FormatMs3(t.gpu.longest_idle_ns) << " ms\n";
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

void OsTable(const StepAnalysis& a, std::ostream& out) {
  const StepRecord& t = a.measured_total;
  const double n = static_cast<double>(a.measured_steps);
  auto per = [&](double v) { return absl::StrFormat("%.1f", v / n); };
  TextTable table({{"role", TextTable::Align::kLeft}, {"vol sw/step"}, {"invol sw/step"}, {"run-queue ms/step"}});
  auto row = [&](std::string name, const SwitchTotals& s) {
    table.AddRow({std::move(name), per(s.voluntary), per(s.involuntary), FormatMs3(s.runqueue_ns / n)});
  };
  row("launching thread", t.os.launching);
  row(absl::StrFormat("data workers (%u processes)", a.worker_processes), t.os.workers);
  row("other threads", t.os.others);
  out << "\nOS costs per measured step\n";
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

void FindingJson(const Finding& f, JsonWriter& json) {
  json.Field("bottleneck", BottleneckKey(f.bottleneck));
  json.Field("title", BottleneckTitle(f.bottleneck));
  json.Field("evidence", f.evidence);
  json.Field("recommendation", f.recommendation);
  json.Field("score_pct", f.score * 100);
  // How much shorter the mean step would be without the finding; null when
  // the trace cannot tell (gain_model says why).
  json.Key("gain_pct");
  if (f.gain) {
    json.Double(*f.gain * 100);
  } else {
    json.Null();
  }
  json.Field("gain_model", f.gain_model);
}

// The tail analysis behind the intermittent_stalls finding (present whether
// or not the stalls cost enough to be a finding).
void StallsJson(const StepAnalysis& a, const IntermittentStalls& s, JsonWriter& json) {
  json.Key("intermittent_stalls");
  json.BeginObject();
  json.Field("steps_considered", static_cast<uint64_t>(s.steps_considered));
  json.Field("stalled_steps", static_cast<uint64_t>(s.stalled.size()));
  json.Key("stalled_step_indices");
  json.BeginArray();
  for (size_t i : s.stalled) json.Uint(a.steps[i].index);
  json.EndArray();
  json.Field("every_nth_step", static_cast<uint64_t>(s.every_nth));
  json.Field("at_start", s.at_start);
  json.Field("median_step_ns", s.median_ns);
  json.Field("p90_step_ns", s.p90_ns);
  json.Field("threshold_ns", s.threshold_ns);
  json.Field("excess_ns", s.excess_ns);
  json.Field("share_of_run_pct", s.share_of_run * 100);
  const std::optional<Stage> stage = s.MainStage();
  json.Key("cause");
  if (stage) {
    json.String(StageKey(*stage));
  } else {
    json.Null();
  }
  const std::optional<IdleCause> idle = s.MainIdleCause();
  json.Key("idle_cause");
  if (idle) {
    json.String(IdleCauseKey(*idle));
  } else {
    json.Null();
  }
  const double n = s.stalled.empty() ? 1.0 : static_cast<double>(s.stalled.size());
  const int64_t positive = s.PositiveStageGrowthNs();
  json.Key("growth_by_stage");
  json.BeginArray();
  for (size_t i = 0; i < kStageCount; ++i) {
    if (s.stage_growth_ns[i] == 0) continue;
    json.BeginObject();
    json.Field("stage", StageKey(static_cast<Stage>(i)));
    json.Field("ns_per_stalled_step", s.stage_growth_ns[i] / n);
    json.Field("pct_of_growth", positive ? 100.0 * s.stage_growth_ns[i] / positive : 0.0);
    json.EndObject();
  }
  json.EndArray();
  json.Key("growth_by_idle_cause");
  json.BeginArray();
  for (size_t i = 0; i < kIdleCauseCount; ++i) {
    if (s.idle_growth_ns[i] == 0) continue;
    json.BeginObject();
    json.Field("cause", IdleCauseKey(static_cast<IdleCause>(i)));
    json.Field("ns_per_stalled_step", s.idle_growth_ns[i] / n);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

// What the job already does, which the recommendations took into account.
void PracticesJson(const StepAnalysis& a, JsonWriter& json) {
  const JobPractices& p = a.practices;
  const StepRecord& t = a.measured_total;
  json.Key("job_practices");
  json.BeginObject();
  json.Field("graph_launches", p.graph_launches);
  json.Field("kernel_launches", p.kernel_launches);
  json.Field("kernels", p.kernels);
  json.Field("graph_kernels", p.graph_kernels);
  json.Field("cuda_graphs_in_use", p.GraphsInUse(a.measured_steps));
  json.Field("htod_copies", p.htod_copies);
  json.Field("htod_pinned", p.htod_pinned);
  json.Field("htod_async", p.htod_async);
  json.Field("htod_off_kernel_streams_pct",
             Share(t.gpu.htod_ns - std::min(t.gpu.htod_ns, t.gpu.htod_on_kernel_stream_ns), t.gpu.htod_ns) * 100);
  json.Field("data_worker_processes", a.worker_processes);
  json.Field("online_cpus", p.online_cpus);
  json.EndObject();
}

void SwitchJson(const char* key, const SwitchTotals& s, JsonWriter& json) {
  json.Key(key);
  json.BeginObject();
  json.Field("voluntary", s.voluntary);
  json.Field("involuntary", s.involuntary);
  json.Field("runqueue_ns", s.runqueue_ns);
  json.EndObject();
}

void MmJson(const char* key, const MmTotals& m, JsonWriter& json) {
  json.Key(key);
  json.BeginObject();
  json.Field("calls", m.calls);
  json.Field("bytes", m.bytes);
  json.Field("ns", m.ns);
  json.EndObject();
}

// The members of one step object after its identity (also used for the
// measured total).
void StepBody(const StepRecord& s, JsonWriter& json) {
  json.Key("breakdown");
  json.BeginObject();
  json.Field("data_wait", s.cpu.data_wait_ns);
  json.Field("sync", s.cpu.sync_ns);
  json.Field("copy_api", s.cpu.copy_api_ns);
  json.Field("launch_api", s.cpu.launch_api_ns);
  json.Field("other_cuda_api", s.cpu.other_cuda_api_ns);
  json.Field("other", s.cpu.other_ns);
  json.Field("off_cpu_futex", s.off_cpu.futex_ns);
  json.Field("off_cpu_page_fault", s.off_cpu.page_fault_ns);
  json.Field("off_cpu_mmap_munmap", s.off_cpu.mmap_munmap_ns);
  json.Field("off_cpu_syscall", s.off_cpu.syscall_ns);
  json.Field("off_cpu_unknown", s.off_cpu.unknown_ns);
  json.Field("off_cpu_preempted", s.off_cpu.preempted_ns);
  json.Field("off_cpu_runqueue", s.off_cpu.runqueue_ns);
  json.Field("gpu_kernel_busy", s.gpu.kernel_busy_ns);
  json.Field("gpu_copy_only", s.gpu.copy_only_ns);
  json.Field("gpu_memset_only", s.gpu.memset_only_ns);
  json.Field("gpu_idle", s.gpu.idle_ns);
  json.Field("gpu_kernel_sum", s.gpu.kernel_ns);
  json.Field("gpu_memcpy_sum", s.gpu.memcpy_ns);
  json.Field("gpu_memset_sum", s.gpu.memset_ns);
  json.Field("gpu_copy_overlap", s.gpu.copy_overlap_ns);
  json.Field("gpu_htod", s.gpu.htod_ns);
  json.Field("gpu_htod_on_kernel_stream", s.gpu.htod_on_kernel_stream_ns);
  json.Field("exposed_pageable_copy", s.exposed_pageable_copy_ns);
  json.Field("exposed_mmap_munmap", s.exposed_mm_ns);
  json.EndObject();
  json.Key("gpu_idle");
  json.BeginObject();
  for (size_t i = 0; i < kIdleCauseCount; ++i) json.Field(IdleCauseKey(static_cast<IdleCause>(i)), s.gpu_idle[i]);
  json.EndObject();
  json.Key("stages");
  json.BeginObject();
  for (size_t i = 0; i < kStageCount; ++i) json.Field(StageKey(static_cast<Stage>(i)), s.stages[i]);
  json.EndObject();
  json.Key("counts");
  json.BeginObject();
  json.Field("kernels", s.gpu.kernels_started);
  json.Field("kernels_ns", s.gpu.kernels_started_ns);
  json.Field("launch_calls", s.api.launch);
  json.Field("memcpy_calls", s.api.memcpy);
  json.Field("pageable_memcpy_calls", s.api.pageable_memcpy);
  json.Field("sync_calls", s.api.sync);
  json.Field("gpu_idle_stretches", static_cast<uint64_t>(s.gpu.idle_stretches));
  json.Field("longest_gpu_idle_ns", s.gpu.longest_idle_ns);
  json.EndObject();
  json.Key("gpu_memcpy");
  json.BeginArray();
  for (const MemcpyPart& m : s.gpu.memcpy) {
    json.BeginObject();
    json.Field("direction", MemcpyDirectionName(m.direction));
    json.Field("src_kind", MemoryKindName(m.src_kind));
    json.Field("dst_kind", MemoryKindName(m.dst_kind));
    json.Field("count", m.count);
    json.Field("bytes", m.bytes);
    json.Field("ns", m.ns);
    json.EndObject();
  }
  json.EndArray();
  json.Key("os");
  json.BeginObject();
  SwitchJson("launching_thread", s.os.launching, json);
  SwitchJson("data_workers", s.os.workers, json);
  SwitchJson("other_threads", s.os.others, json);
  json.Field("page_faults", s.os.page_faults);
  json.Field("major_page_faults", s.os.major_faults);
  MmJson("mmap", s.os.mmap, json);
  MmJson("munmap", s.os.munmap, json);
  json.EndObject();
}

void StatsJson(const char* key, const DistributionStats& d, JsonWriter& json, double scale) {
  json.Key(key);
  json.BeginObject();
  json.Field("mean", d.mean * scale);
  json.Field("p50", d.p50 * scale);
  json.Field("p95", d.p95 * scale);
  json.Field("min", d.min * scale);
  json.Field("max", d.max * scale);
  json.EndObject();
}

// Measured steps whose GPU side the summaries use: those with CUDA detail
// (every measured step without capture windows).
size_t CountDetailSteps(const StepAnalysis& a) {
  size_t n = 0;
  for (const StepRecord& s : a.steps) n += s.cuda_detail && (a.summary_includes_warmup || !s.warmup);
  return n;
}

void CaptureText(const StepAnalysis& a, std::ostream& out) {
  if (!a.capture.in_use()) return;
  const size_t detail = CountDetailSteps(a);
  out << absl::StrFormat("  capture windows (%s): %d window%s; CUDA detail in %d of %d steps",
                         a.capture.spec.empty() ? "on demand" : Printable(a.capture.spec), a.capture.windows.size(),
                         a.capture.windows.size() == 1 ? "" : "s", detail, a.measured_steps + a.steps_without_detail);
  if (a.steps_without_detail > 0) {
    out << absl::StrFormat("; the summaries below are over those %d, step time over all %d: mean %s ms, p50 %s\n",
                           a.measured_steps, a.all_steps_duration_ns.count, FormatMs3(a.all_steps_duration_ns.mean),
                           FormatMs3(a.all_steps_duration_ns.p50));
  } else if (detail == 0) {
    out << "; no step has CUDA detail, so GPU parts and GPU idle causes below are empty, not measured\n";
  } else {
    out << "\n";
  }
}

void CaptureJson(const CaptureInfo& capture, JsonWriter& json) {
  json.Key("capture");
  if (!capture.in_use()) {
    json.Null();
    return;
  }
  json.BeginObject();
  json.Field("spec", capture.spec);
  json.Key("windows");
  json.BeginArray();
  for (const CaptureWindowSpan& w : capture.windows) {
    json.BeginObject();
    json.Field("pid", w.pid);
    json.Key("first_step");
    if (w.first_step < 0) json.Null(); else json.Int(w.first_step);
    json.Key("last_step");
    if (w.last_step < 0) json.Null(); else json.Int(w.last_step);
    json.Field("start_ns", w.start_ns);
    json.Field("end_ns", w.end_ns);
    json.Field("reason", w.reason);
    json.Field("closed", w.closed);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

}  // namespace

void WriteStepTextReport(const StepAnalysis& a, const Diagnosis& d, std::ostream& out, size_t max_steps) {
  out << "\nTraining steps\n";
  if (!a.has_steps()) {
    out << "  No steps: " << Printable(a.note) << "\n";
    if (!a.read_error.empty()) out << "  (read up to the damage: " << Printable(a.read_error) << ")\n";
    return;
  }
  const size_t warmup =
      a.steps.size() - (a.summary_includes_warmup ? 0 : a.measured_steps + a.steps_without_detail);
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
  if (StepSourceIsInferred(a.source)) {
    out << "  how: " << Printable(a.note) << "\n";
  }
  out << absl::StrFormat("  step time over %d measured steps: mean %s ms, p50 %s, p95 %s, min %s, max %s\n",
                         a.measured_steps, FormatMs3(a.duration_ns.mean), FormatMs3(a.duration_ns.p50),
                         FormatMs3(a.duration_ns.p95), FormatMs3(a.duration_ns.min), FormatMs3(a.duration_ns.max));
  CaptureText(a, out);
  StepTable(a, out, max_steps);
  StageTable(a, out);
  IdleTable(a, out);
  OsTable(a, out);
  DiagnosisText(d, out);
  if (!a.read_error.empty()) out << "  (steps read up to the damage: " << Printable(a.read_error) << ")\n";
}

void WriteStepJsonMembers(const StepAnalysis& a, const Diagnosis& d, JsonWriter& json) {
  json.Key("step_analysis");
  json.BeginObject();
  json.Field("source", StepSourceName(a.source));
  json.Field("note", a.note);
  json.Key("anchor");
  if (a.anchor_name.empty()) {
    json.Null();
  } else {
    json.String(a.anchor_name);
  }
  if (a.source == StepSource::kFixedWindows) json.Field("fixed_window_ns", a.options.fixed_window_ns);
  json.Field("step_regex", a.options.step_regex);
  json.Field("data_range_regex", a.options.data_range_regex);
  json.Field("pid", a.pid);
  json.Field("tid", a.tid);
  json.Field("thread_comm", a.thread_comm);
  json.Field("driving_thread", a.driving_thread_note);
  json.Field("other_threads_with_steps", a.other_threads_with_steps);
  json.Field("data_worker_processes", a.worker_processes);
  json.Field("data_worker_threads", a.worker_threads);
  json.Field("steps", static_cast<uint64_t>(a.steps.size()));
  json.Field("measured_steps", static_cast<uint64_t>(a.measured_steps));
  uint64_t left_out = 0;
  for (const StepRecord& s : a.steps) left_out += !s.left_out.empty();
  // Steps a repeating sequence kept out of the summaries (each says why).
  json.Field("left_out_steps", left_out);
  json.Field("summary_includes_warmup", a.summary_includes_warmup);
  json.Field("measured_wall_ns", a.measured_wall_ns);
  StatsJson("duration_ns", a.duration_ns, json, 1.0);
  // Capture windows: the summaries above are over the steps with CUDA
  // detail; every step's wall time is in all_steps_duration_ns.
  json.Field("cuda_detail_steps", static_cast<uint64_t>(CountDetailSteps(a)));
  json.Field("steps_without_cuda_detail", static_cast<uint64_t>(a.steps_without_detail));
  StatsJson("all_steps_duration_ns", a.all_steps_duration_ns, json, 1.0);
  if (!a.read_error.empty()) json.Field("read_error", a.read_error);
  json.EndObject();

  CaptureJson(a.capture, json);

  json.Key("steps");
  json.BeginArray();
  for (const StepRecord& s : a.steps) {
    json.BeginObject();
    json.Field("index", s.index);
    json.Field("start_ns", s.start_ns);
    json.Field("end_ns", s.end_ns);
    json.Field("duration_ns", s.duration_ns());
    json.Field("warmup", s.warmup);
    json.Field("cuda_detail", s.cuda_detail);
    if (!s.left_out.empty()) json.Field("left_out", s.left_out);
    StepBody(s, json);
    json.EndObject();
  }
  json.EndArray();

  json.Key("stage_summary");
  if (!a.has_steps()) {
    json.Null();
  } else {
    json.BeginObject();
    json.Field("measured_steps", static_cast<uint64_t>(a.measured_steps));
  uint64_t left_out = 0;
  for (const StepRecord& s : a.steps) left_out += !s.left_out.empty();
  // Steps a repeating sequence kept out of the summaries (each says why).
  json.Field("left_out_steps", left_out);
    json.Field("wall_ns", a.measured_wall_ns);
    json.Key("stages");
    json.BeginArray();
    for (size_t i = 0; i < kStageCount; ++i) {
      const DistributionStats& st = a.stage_share[i];
      json.BeginObject();
      json.Field("stage", StageKey(static_cast<Stage>(i)));
      json.Field("name", StageName(static_cast<Stage>(i)));
      json.Field("mean_pct", st.mean * 100);
      json.Field("p50_pct", st.p50 * 100);
      json.Field("p95_pct", st.p95 * 100);
      json.Field("total_ns", a.measured_total.stages[i]);
      json.Field("pct_of_total", Share(a.measured_total.stages[i], a.measured_wall_ns) * 100);
      json.EndObject();
    }
    json.EndArray();
    json.Key("measured_total");
    json.BeginObject();
    StepBody(a.measured_total, json);
    json.EndObject();
    json.EndObject();
  }

  json.Key("gpu_idle_attribution");
  if (!a.has_steps()) {
    json.Null();
  } else {
    const StepRecord& t = a.measured_total;
    json.BeginObject();
    json.Field("idle_ns", t.gpu.idle_ns);
    json.Field("wall_ns", a.measured_wall_ns);
    json.Field("idle_pct", Share(t.gpu.idle_ns, a.measured_wall_ns) * 100);
    json.Field("stretches", static_cast<uint64_t>(t.gpu.idle_stretches));
    json.Field("longest_ns", t.gpu.longest_idle_ns);
    json.Key("causes");
    json.BeginArray();
    for (size_t i = 0; i < kIdleCauseCount; ++i) {
      json.BeginObject();
      json.Field("cause", IdleCauseKey(static_cast<IdleCause>(i)));
      json.Field("name", IdleCauseName(static_cast<IdleCause>(i)));
      json.Field("ns", t.gpu_idle[i]);
      json.Field("pct_of_idle", Share(t.gpu_idle[i], t.gpu.idle_ns) * 100);
      json.Field("pct_of_step_time", Share(t.gpu_idle[i], a.measured_wall_ns) * 100);
      WaitChainJson(a, static_cast<IdleCause>(i), json);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  }

  json.Key("diagnosis");
  json.BeginObject();
  FindingJson(d.primary, json);
  json.Field("headline", d.headline);
  json.Key("secondary");
  json.BeginArray();
  for (const Finding& f : d.secondary) {
    json.BeginObject();
    FindingJson(f, json);
    json.EndObject();
  }
  json.EndArray();
  if (a.has_steps()) {
    StallsJson(a, d.stalls, json);
    PracticesJson(a, json);
  }
  json.EndObject();
}

}  // namespace gpuos
