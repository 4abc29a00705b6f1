// The step analysis' members of the JSON report ("step_analysis",
// "capture", "steps", "stage_summary", "gpu_idle_attribution",
// "diagnosis"); see report/step_report.h.
#include <algorithm>
#include <string>
#include <vector>

#include "analysis/cuda_summary.h"
#include "export/report/format.h"
#include "export/report/step_columns.h"
#include "export/report/step_report.h"
#include "export/report/wait_chain_text.h"

namespace gpuos {
namespace {

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
  // Whether another run of the job may read otherwise (diagnosis.h,
  // kNearThresholdFraction).
  json.Field("near_threshold", f.near_threshold);
  json.Key("near_miss");
  if (f.near_miss) {
    json.String(BottleneckKey(*f.near_miss));
  } else {
    json.Null();
  }
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
  // Long steps the dataloader_worker_restarts finding names instead.
  json.Key("worker_restart_step_indices");
  json.BeginArray();
  for (size_t i : s.explained) json.Uint(a.steps[i].index);
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

void BlockIoJson(const char* key, const BlockIoCounts& b, JsonWriter& json) {
  json.Key(key);
  json.BeginObject();
  json.Field("requests", b.requests);
  json.Field("bytes", b.bytes);
  json.Field("ns", b.ns);
  json.EndObject();
}

// "os": context switches by role, the launching thread's faults and
// mmap/munmap, block I/O by role.
void OsJson(const StepOsCosts& os, JsonWriter& json) {
  json.Key("os");
  json.BeginObject();
  SwitchJson("launching_thread", os.launching, json);
  SwitchJson("data_workers", os.workers, json);
  SwitchJson("other_threads", os.others, json);
  json.Field("page_faults", os.page_faults);
  json.Field("major_page_faults", os.major_faults);
  MmJson("mmap", os.mmap, json);
  MmJson("munmap", os.munmap, json);
  BlockIoJson("block_io_launching_thread", os.block_io_launching, json);
  BlockIoJson("block_io_data_workers", os.block_io_workers, json);
  BlockIoJson("block_io_other_threads", os.block_io_others, json);
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
  json.Field("allocate_api", s.cpu.allocate_api_ns);  // of other_cuda_api
  json.Field("off_cpu_futex", s.off_cpu.futex_ns);
  json.Field("off_cpu_page_fault", s.off_cpu.page_fault_ns);
  json.Field("off_cpu_mmap_munmap", s.off_cpu.mmap_munmap_ns);
  json.Field("off_cpu_syscall", s.off_cpu.syscall_ns);
  json.Field("off_cpu_unknown", s.off_cpu.unknown_ns);
  json.Field("off_cpu_preempted", s.off_cpu.preempted_ns);
  json.Field("off_cpu_runqueue", s.off_cpu.runqueue_ns);
  json.Field("off_cpu_disk", s.off_cpu.disk_ns);  // of page_fault, syscall and unknown
  json.Field("gpu_kernel_busy", s.gpu.kernel_busy_ns);
  json.Field("gpu_comm_only", s.gpu.comm_only_ns);
  json.Field("gpu_copy_only", s.gpu.copy_only_ns);
  json.Field("gpu_memset_only", s.gpu.memset_only_ns);
  json.Field("gpu_idle", s.gpu.idle_ns);
  json.Field("gpu_kernel_sum", s.gpu.kernel_ns);
  json.Field("gpu_comm_kernel_sum", s.gpu.comm_kernel_ns);
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
  json.Field("comm_kernels", s.gpu.comm_kernels_started);
  json.Field("comm_kernels_ns", s.gpu.comm_kernels_started_ns);
  json.Field("launch_calls", s.api.launch);
  json.Field("memcpy_calls", s.api.memcpy);
  json.Field("pageable_memcpy_calls", s.api.pageable_memcpy);
  json.Field("sync_calls", s.api.sync);
  json.Field("syncs_between_launches", s.api.syncs_between_launches);
  json.Field("gpu_idle_stretches", static_cast<uint64_t>(s.gpu.idle_stretches));
  json.Field("longest_gpu_idle_ns", s.gpu.longest_idle_ns);
  json.Field("gpu_idle_after_sync_ns", s.gpu.idle_after_sync_ns);
  json.Field("allocation_calls", s.api.allocations);
  json.Field("gpu_idle_allocation_ns", s.gpu.idle_allocation_ns);
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
  OsJson(s.os, json);
  // The part of each stage spent waiting for disk (DiskPartOfStages).
  const StageTimes disk = DiskPartOfStages(s);
  json.Key("stages_waiting_for_disk");
  json.BeginObject();
  for (size_t i = 0; i < kStageCount; ++i) json.Field(StageKey(static_cast<Stage>(i)), disk[i]);
  json.EndObject();
}

void CaptureJson(const CaptureInfo& capture, JsonWriter& json) {
  json.Key("capture");
  if (!capture.in_use()) {
    json.Null();
    return;
  }
  json.BeginObject();
  json.Field("spec", capture.spec);
  if (!capture.note.empty()) json.Field("note", capture.note);
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
    json.Field("cupti_subscribed", w.cupti_subscribed);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

uint64_t LeftOutSteps(const StepAnalysis& a) {
  uint64_t left_out = 0;
  for (const StepRecord& s : a.steps) left_out += !s.left_out.empty();
  return left_out;
}

// "step_analysis": how the steps were found and what the summaries are over.
void StepAnalysisJson(const StepAnalysis& a, JsonWriter& json) {
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
  json.Field("data_fetch_ranges", a.data_fetch_ranges);
  json.Field("python_hook_marks", a.python_hook_marks);
  json.Field("pid", a.pid);
  json.Field("tid", a.tid);
  json.Field("thread_comm", a.thread_comm);
  json.Field("driving_thread", a.driving_thread_note);
  json.Field("other_threads_with_steps", a.other_threads_with_steps);
  json.Field("data_worker_processes", a.worker_processes);
  json.Field("data_worker_threads", a.worker_threads);
  json.Field("steps", static_cast<uint64_t>(a.steps.size()));
  json.Field("measured_steps", static_cast<uint64_t>(a.measured_steps));
  // Steps a repeating sequence kept out of the summaries (each says why).
  json.Field("left_out_steps", LeftOutSteps(a));
  json.Field("summary_includes_warmup", a.summary_includes_warmup);
  json.Field("measured_wall_ns", a.measured_wall_ns);
  StatsJson("duration_ns", a.duration_ns, json, 1.0);
  // Capture windows: the summaries above are over the steps with CUDA
  // detail; every step's wall time is in all_steps_duration_ns.
  json.Field("cuda_detail_steps", static_cast<uint64_t>(CudaDetailSteps(a)));
  json.Field("steps_without_cuda_detail", static_cast<uint64_t>(a.steps_without_detail));
  // Window-start steps: with detail, but out of the summaries above.
  json.Field("window_start_steps", static_cast<uint64_t>(a.window_start_steps));
  AttachCoverageJson(a, json);
  // How much longer the median step with detail took than the median step
  // (CUPTI's cost inside windows); 0 without windows.
  json.Field("detail_steps_slowdown", DetailStepsSlowdown(a));
  StatsJson("all_steps_duration_ns", a.all_steps_duration_ns, json, 1.0);
  // Every measured step, with CUDA detail or not: what the OS-side
  // summary ("step_os_summary") is over.
  json.Field("all_steps", static_cast<uint64_t>(a.all_steps));
  json.Field("all_steps_wall_ns", a.all_steps_wall_ns);
  if (!a.read_error.empty()) json.Field("read_error", a.read_error);
  json.EndObject();
}

void StepsJson(const StepAnalysis& a, JsonWriter& json) {
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
    if (s.window_start) json.Field("window_start", true);
    if (!s.left_out.empty()) json.Field("left_out", s.left_out);
    StepBody(s, json);
    json.EndObject();
  }
  json.EndArray();
}

void StageSummaryJson(const StepAnalysis& a, JsonWriter& json) {
  json.Key("stage_summary");
  if (!a.has_steps()) {
    json.Null();
    return;
  }
  json.BeginObject();
  json.Field("measured_steps", static_cast<uint64_t>(a.measured_steps));
  // The steps this summary is over (with capture windows: those with CUDA
  // detail).
  json.Field("steps", static_cast<uint64_t>(a.measured_steps));
  json.Field("cuda_detail_steps_only", GpuSideOverFewerSteps(a));
  // Steps a repeating sequence kept out of the summaries (each says why).
  json.Field("left_out_steps", LeftOutSteps(a));
  json.Field("wall_ns", a.measured_wall_ns);
  const StageTimes disk = DiskPartOfStages(a.measured_total);
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
    json.Field("waiting_for_disk_ns", disk[i]);
    json.EndObject();
  }
  json.EndArray();
  json.Key("measured_total");
  json.BeginObject();
  StepBody(a.measured_total, json);
  json.EndObject();
  json.EndObject();
}

void IdleAttributionJson(const StepAnalysis& a, JsonWriter& json) {
  json.Key("gpu_idle_attribution");
  if (!a.has_steps()) {
    json.Null();
    return;
  }
  const StepRecord& t = a.measured_total;
  json.BeginObject();
  json.Field("steps", static_cast<uint64_t>(a.measured_steps));
  json.Field("cuda_detail_steps_only", GpuSideOverFewerSteps(a));
  json.Field("idle_ns", t.gpu.idle_ns);
  json.Field("wall_ns", a.measured_wall_ns);
  json.Field("idle_pct", Share(t.gpu.idle_ns, a.measured_wall_ns) * 100);
  json.Field("stretches", static_cast<uint64_t>(t.gpu.idle_stretches));
  json.Field("longest_ns", t.gpu.longest_idle_ns);
  json.Key("after_sync");
  json.BeginObject();
  json.Field("ns", t.gpu.idle_after_sync_ns);
  json.Field("pct_of_step_time", Share(t.gpu.idle_after_sync_ns, a.measured_wall_ns) * 100);
  json.Field("stretches", static_cast<uint64_t>(t.gpu.idle_stretches_after_sync));
  json.Field("syncs_between_launches_per_step", a.SyncsBetweenLaunchesPerStep());
  json.EndObject();
  json.Key("allocation");
  json.BeginObject();
  json.Field("ns", t.gpu.idle_allocation_ns);
  json.Field("pct_of_step_time", Share(t.gpu.idle_allocation_ns, a.measured_wall_ns) * 100);
  json.Field("stretches_after", static_cast<uint64_t>(t.gpu.idle_stretches_after_allocation));
  json.Field("allocation_calls_per_step", a.AllocationsPerStep());
  json.EndObject();
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

// The OS and CPU side of the steps, which needs no CUDA detail: over every
// measured step (with capture windows, more than the summaries above).
void StepOsSummaryJson(const StepAnalysis& a, JsonWriter& json) {
  json.Key("step_os_summary");
  if (!a.has_steps()) {
    json.Null();
    return;
  }
  const StepRecord& t = a.all_steps_total;
  json.BeginObject();
  json.Field("steps", static_cast<uint64_t>(a.all_steps));
  json.Field("wall_ns", a.all_steps_wall_ns);
  StatsJson("duration_ns", a.all_steps_duration_ns, json, 1.0);
  json.Key("totals");
  json.BeginObject();
  json.Field("data_wait", t.cpu.data_wait_ns);
  json.Field("off_cpu_futex", t.off_cpu.futex_ns);
  json.Field("off_cpu_page_fault", t.off_cpu.page_fault_ns);
  json.Field("off_cpu_mmap_munmap", t.off_cpu.mmap_munmap_ns);
  json.Field("off_cpu_syscall", t.off_cpu.syscall_ns);
  json.Field("off_cpu_unknown", t.off_cpu.unknown_ns);
  json.Field("off_cpu_preempted", t.off_cpu.preempted_ns);
  json.Field("off_cpu_runqueue", t.off_cpu.runqueue_ns);
  json.Field("off_cpu_disk", t.off_cpu.disk_ns);
  json.EndObject();
  OsJson(t.os, json);
  json.EndObject();
}

void DiagnosisJson(const StepAnalysis& a, const Diagnosis& d, JsonWriter& json) {
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

}  // namespace

void AttachCoverageJson(const StepAnalysis& a, JsonWriter& json) {
  json.Key("attach_coverage");
  const std::optional<AttachCoverage> c = a.Coverage();
  if (!c) {
    json.Null();
    return;
  }
  json.BeginObject();
  json.Field("window_ns", c->window_ns);
  json.Field("in_steps_ns", c->in_steps_ns);
  json.Field("before_first_step_ns", c->before_first_ns);
  json.Field("after_last_step_ns", c->after_last_ns);
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

void WriteStepJsonMembers(const StepAnalysis& a, const Diagnosis& d, JsonWriter& json) {
  StepAnalysisJson(a, json);
  CaptureJson(a.capture, json);
  StepsJson(a, json);
  StageSummaryJson(a, json);
  IdleAttributionJson(a, json);
  StepOsSummaryJson(a, json);
  DiagnosisJson(a, d, json);
}

}  // namespace gpuos
