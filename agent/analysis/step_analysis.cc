// The two passes and the summaries over measured steps; see step_analysis.h.
#include "analysis/step_analysis.h"

#include <optional>

#include "analysis/driving_thread.h"
#include "analysis/step_collector.h"
#include "analysis/thread_activity.h"
#include "analysis/thread_roles.h"
#include "analysis/wakeup_chain.h"
#include "analysis/worker_restarts.h"
#include "stream/trace_reader.h"

namespace gpuos {

StepAnalysis SummarizeSteps(const StepPlan& plan, std::vector<StepRecord> steps, const StepOptions& options) {
  StepAnalysis a;
  a.options = options;
  a.source = plan.source;
  a.note = plan.note;
  a.anchor_name = plan.anchor_name;
  a.pid = plan.pid;
  a.tid = plan.tid;
  a.thread_comm = plan.thread_comm;
  a.other_threads_with_steps = plan.other_threads_with_steps;
  a.worker_processes = plan.worker_processes;
  a.worker_processes_started = plan.worker_processes_started;
  a.worker_threads = static_cast<uint32_t>(plan.worker_tids.size());
  a.data_fetch_ranges = plan.data_fetch_ranges;
  a.python_hook_marks = plan.python_hook_marks;
  a.attach_start_ns = plan.attach_start_ns;
  a.attach_end_ns = plan.attach_end_ns;
  a.steps = std::move(steps);
  KeepEpochStartsMeasured(a.steps, options.warmup_steps);

  bool any_measured = false;
  for (const StepRecord& s : a.steps) any_measured |= !s.warmup;
  a.summary_includes_warmup = !any_measured && !a.steps.empty();
  // With capture windows, the summaries are over the steps with CUDA detail
  // (analysis/capture_detail.h); with none among them, over all, and the
  // GPU side says it has no detail.
  bool any_detail = false;
  for (const StepRecord& s : a.steps) any_detail |= s.cuda_detail && !(s.warmup && any_measured);

  std::vector<double> durations, all_durations;
  std::array<std::vector<double>, kStageCount> shares;
  for (const StepRecord& s : a.steps) {
    if (s.warmup && any_measured) continue;
    all_durations.push_back(static_cast<double>(s.duration_ns()));
    ++a.all_steps;
    AddStepTotals(a.all_steps_total, s);
    a.all_steps_wall_ns += s.duration_ns();
    if (any_detail && !s.cuda_detail) {
      ++a.steps_without_detail;
      continue;
    }
    if (s.window_start) {  // its window has other detail steps (capture_detail.h)
      ++a.window_start_steps;
      continue;
    }
    ++a.measured_steps;
    AddStepTotals(a.measured_total, s);
    a.measured_wall_ns += s.duration_ns();
    durations.push_back(static_cast<double>(s.duration_ns()));
    if (s.duration_ns() == 0) continue;
    for (size_t i = 0; i < kStageCount; ++i) {
      shares[i].push_back(static_cast<double>(s.stages[i]) / s.duration_ns());
    }
  }
  a.duration_ns = Distribution(std::move(durations));
  a.all_steps_duration_ns = Distribution(std::move(all_durations));
  for (size_t i = 0; i < kStageCount; ++i) a.stage_share[i] = Distribution(std::move(shares[i]));
  return a;
}

namespace {

using Replay = std::function<absl::Status(const std::function<void(const v1::Event&)>&,
                                          const std::function<void(const v1::TraceTrailer&)>&)>;

absl::StatusOr<StepAnalysis> Analyze(const v1::TraceHeader& header, const Replay& replay,
                                     const StepOptions& options, const absl::flat_hash_set<uint32_t>& helpers = {}) {
  auto locator = StepLocator::Create(options);
  if (!locator.ok()) return locator.status();
  // An attached trace's steps stay within its attach window.
  (*locator)->SetHeader(header);
  ThreadActivity activity;
  CaptureWindowCollector windows;
  std::optional<v1::TraceTrailer> trailer;
  absl::Status read = replay(
      [&](const v1::Event& e) {
        (*locator)->Add(e);
        activity.Add(e);
        windows.Add(e);
      },
      [&](const v1::TraceTrailer& t) {
        (*locator)->SetTrailer(t);
        trailer = t;
      });
  StepPlan plan = (*locator)->Finish();
  const std::string driving = ApplyDrivingThread(activity, plan, helpers);
  ThreadRoles roles = ThreadRoles::Assign(activity, plan);
  std::vector<StepRecord> records;
  JobPracticeTally practices(plan, header);
  if (!plan.steps.empty()) {
    auto collector =
        StepCollector::Create(plan, options, header, &roles, ThreadsThatCanBeOnAChain(activity, plan.tid));
    if (!collector.ok()) return collector.status();
    absl::Status second = replay(
        [&](const v1::Event& e) {
          (*collector)->Add(e);
          practices.Add(e);
        },
        {});
    if (read.ok()) read = second;
    records = (*collector)->Finish();
  }
  CaptureInfo capture = windows.Finish(header, trailer ? &*trailer : nullptr);
  MarkCudaDetail(plan.pid, records, capture);
  StepAnalysis analysis = SummarizeSteps(plan, std::move(records), options);
  // The shim counts the steps of NVTX step ranges and the Python hook's
  // marks, else the CUDA calls' rhythm (whose marks name the source).
  NoteUncountedSteps(plan.source == StepSource::kNvtxRanges || plan.source == StepSource::kOptimizerSteps ||
                         plan.source == StepSource::kBackwardRanges,
                     plan.live_rhythm, capture);
  analysis.capture = std::move(capture);
  analysis.practices = practices.practices();
  analysis.driving_thread_note = driving;
  // Only the threads the report names: those on a chain.
  for (const WaitVia& v : analysis.measured_total.via) {
    if (const ThreadInfo* info = roles.Find(v.tid)) analysis.threads[v.tid] = *info;
  }
  if (!read.ok()) analysis.read_error = std::string(read.message());
  return analysis;
}

}  // namespace

absl::StatusOr<StepAnalysis> AnalyzeSteps(const std::string& path, const StepOptions& options) {
  auto first = TraceReader::Open(path);
  if (!first.ok()) return first.status();
  const v1::TraceHeader header = (*first)->header();
  bool first_used = false;
  Replay replay = [&](const std::function<void(const v1::Event&)>& on_event,
                      const std::function<void(const v1::TraceTrailer&)>& on_trailer) -> absl::Status {
    if (!first_used) {
      first_used = true;
      return ForEachEvent(**first, on_event, on_trailer);
    }
    auto again = TraceReader::Open(path);
    if (!again.ok()) return again.status();
    return ForEachEvent(**again, on_event, on_trailer);
  };
  return Analyze(header, replay, options);
}

absl::StatusOr<StepAnalysis> AnalyzeStepsOfProcesses(const std::string& path, const StepOptions& options,
                                                     const absl::flat_hash_set<uint32_t>& pids,
                                                     const absl::flat_hash_set<uint32_t>& helpers) {
  auto first = TraceReader::Open(path);
  if (!first.ok()) return first.status();
  const v1::TraceHeader header = (*first)->header();
  bool first_used = false;
  Replay replay = [&](const std::function<void(const v1::Event&)>& on_event,
                      const std::function<void(const v1::TraceTrailer&)>& on_trailer) -> absl::Status {
    auto kept = [&](const v1::Event& e) {
      if (e.pid() == 0 || pids.contains(e.pid())) on_event(e);
    };
    if (!first_used) {
      first_used = true;
      return ForEachEvent(**first, kept, on_trailer);
    }
    auto again = TraceReader::Open(path);
    if (!again.ok()) return again.status();
    return ForEachEvent(**again, kept, on_trailer);
  };
  return Analyze(header, replay, options, helpers);
}

absl::StatusOr<StepAnalysis> AnalyzeStepEvents(const v1::TraceHeader& header, const std::vector<v1::Event>& events,
                                               const StepOptions& options, const v1::TraceTrailer* trailer,
                                               const absl::flat_hash_set<uint32_t>& helpers) {
  Replay replay = [&](const std::function<void(const v1::Event&)>& on_event,
                      const std::function<void(const v1::TraceTrailer&)>& on_trailer) -> absl::Status {
    for (const v1::Event& e : events) on_event(e);
    if (trailer != nullptr && on_trailer) on_trailer(*trailer);
    return absl::OkStatus();
  };
  return Analyze(header, replay, options, helpers);
}

}  // namespace gpuos
