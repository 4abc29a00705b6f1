// Training steps of a trace and where their time went: the entry point of
// the step analysis behind `gpuos-trace report` (issue 5).  Two passes over
// the file: the first finds the steps (step_finder.h) and the driving
// thread (driving_thread.h), the second collects that thread's and its
// process's activity within the steps, and the off-CPU intervals of the
// threads that can be on its wakeup chains (step_collector.h); each step is then broken
// down (step_breakdown.h) and the measured steps summarized here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/capture_detail.h"
#include "analysis/job_practices.h"
#include "analysis/step_breakdown.h"
#include "analysis/step_finder.h"
#include "analysis/step_options.h"
#include "analysis/step_stages.h"
#include "analysis/thread_roles.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

// How much of an attach window the steps hold: a job attached during a
// stall (an evaluation, a checkpoint, its DataLoader's workers starting)
// has time before its first step, or after its last, that no figure of
// the step analysis covers.
struct AttachCoverage {
  uint64_t window_ns = 0;
  uint64_t in_steps_ns = 0;  // from the first step's start to the last's end
  uint64_t before_first_ns = 0;
  uint64_t after_last_ns = 0;
  double Share() const { return window_ns ? static_cast<double>(in_steps_ns) / static_cast<double>(window_ns) : 0; }
};
// Below this share of the window, the reports say how much the steps hold.
inline constexpr double kLowAttachCoverage = 0.9;

struct StepAnalysis {
  StepOptions options;
  StepSource source = StepSource::kNone;
  // Why there are no steps (source == kNone), or how unannotated steps were
  // found (kApiRhythm, kFixedWindows), for the report.
  std::string note;
  // kApiRhythm: the API call whose calls mark the steps.
  std::string anchor_name;
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string thread_comm;
  uint32_t other_threads_with_steps = 0;
  uint32_t worker_processes = 0;  // alive at once, at most (StepPlan's)
  uint32_t worker_processes_started = 0;
  uint32_t worker_threads = 0;  // threads named like workers (outside worker processes too)
  bool data_fetch_ranges = false;  // StepPlan::data_fetch_ranges
  bool python_hook_marks = false;  // StepPlan::python_hook_marks
  uint64_t attach_start_ns = 0;    // StepPlan's: 0 in a launched trace
  uint64_t attach_end_ns = 0;
  // Which thread drives the GPU and why (driving_thread.h), for the report.
  std::string driving_thread_note;
  // The threads on the driving thread's wakeup chains (measured_total.via).
  absl::flat_hash_map<uint32_t, ThreadInfo> threads;

  std::vector<StepRecord> steps;  // in start order, warmup steps included

  // Capture windows (--capture, --always-on): the spec and the windows.
  CaptureInfo capture;
  // Steps neither warmup nor left out that had no CUDA detail: kept out of
  // the measured summaries below, which are then over the steps with detail
  // only, so that GPU parts and GPU idle attribution mean what they say.
  size_t steps_without_detail = 0;
  // Window-start steps (step_breakdown.h) left out of the measured
  // summaries the same way: they paid CUPTI's subscription.
  size_t window_start_steps = 0;
  // The OS and CPU side needs no CUDA detail: wall time, OS costs, off-CPU
  // time, data-fetch ranges and block I/O are summed here over every
  // measured step, with or without detail (all_steps = measured_steps +
  // steps_without_detail).  The GPU-side parts of all_steps_total cover the
  // steps without detail as they were recorded (no kernels): read those
  // from measured_total.
  size_t all_steps = 0;
  StepRecord all_steps_total;
  uint64_t all_steps_wall_ns = 0;
  DistributionStats all_steps_duration_ns;

  // Summaries over the measured steps: those not marked warmup, or, when
  // every step is warmup, all of them (summary_includes_warmup is then set);
  // in a trace with capture windows, only those with CUDA detail (when
  // there are any).
  size_t measured_steps = 0;
  bool summary_includes_warmup = false;
  StepRecord measured_total;  // every part summed over the measured steps
  uint64_t measured_wall_ns = 0;
  DistributionStats duration_ns;
  // Per stage: the distribution of the stage's share (0..1) of each step.
  std::array<DistributionStats, kStageCount> stage_share{};

  // What the job already does (CUDA graphs, pinned/async copies) over the
  // measured steps, and the host's CPU count.
  JobPractices practices;

  // Set when the file was damaged: steps were analyzed up to the damage.
  std::string read_error;

  bool has_steps() const { return !steps.empty(); }
  // StepPlan::WorkersAreNotADataLoaders, from the facts copied above.
  bool WorkersAreNotADataLoaders() const {
    return gpuos::WorkersAreNotADataLoaders(worker_processes, worker_threads, python_hook_marks, data_fetch_ranges);
  }
  // ApiCounts::syncs_between_launches per measured step (0 without any).
  double SyncsBetweenLaunchesPerStep() const {
    return measured_steps ? static_cast<double>(measured_total.api.syncs_between_launches) / measured_steps : 0.0;
  }
  // ApiCounts::allocations per measured step (0 without any).
  double AllocationsPerStep() const {
    return measured_steps ? static_cast<double>(measured_total.api.allocations) / measured_steps : 0.0;
  }
  // An attached trace's coverage by the steps; nullopt in a launched trace
  // or one without steps.
  std::optional<AttachCoverage> Coverage() const {
    if (attach_end_ns <= attach_start_ns || attach_start_ns == 0 || steps.empty()) return std::nullopt;
    AttachCoverage c;
    c.window_ns = attach_end_ns - attach_start_ns;
    c.in_steps_ns = steps.back().end_ns > steps.front().start_ns ? steps.back().end_ns - steps.front().start_ns : 0;
    c.before_first_ns = steps.front().start_ns > attach_start_ns ? steps.front().start_ns - attach_start_ns : 0;
    c.after_last_ns = attach_end_ns > steps.back().end_ns ? attach_end_ns - steps.back().end_ns : 0;
    return c;
  }
  // Whether step `s` is one of the measured steps the summaries are over.
  bool InSummaries(const StepRecord& s) const {
    return (summary_includes_warmup || !s.warmup) && (steps_without_detail == 0 || s.cuda_detail) &&
           !s.window_start;
  }
};

// Two passes over the .gpuos file at `path`.  Errors: the file cannot be
// opened or has no valid header; a regex in `options` does not compile.
absl::StatusOr<StepAnalysis> AnalyzeSteps(const std::string& path, const StepOptions& options);

// The same over the events of the processes in `pids` only (and those of
// no process), as if the trace held nothing else: one rank of a
// distributed job with its data workers (rank_analysis.h).  `helpers`:
// threads never chosen as the driving thread (its communication threads).
absl::StatusOr<StepAnalysis> AnalyzeStepsOfProcesses(const std::string& path, const StepOptions& options,
                                                     const absl::flat_hash_set<uint32_t>& pids,
                                                     const absl::flat_hash_set<uint32_t>& helpers = {});

// The same over events in memory (tests, small traces); `trailer`, when
// given, ends an attach window.
absl::StatusOr<StepAnalysis> AnalyzeStepEvents(const v1::TraceHeader& header, const std::vector<v1::Event>& events,
                                               const StepOptions& options, const v1::TraceTrailer* trailer = nullptr,
                                               const absl::flat_hash_set<uint32_t>& helpers = {});

// For callers that run the two passes themselves (e.g. pass 1 fused with
// another summary's pass): the summaries from the plan and the collector's
// records.
StepAnalysis SummarizeSteps(const StepPlan& plan, std::vector<StepRecord> steps, const StepOptions& options);

}  // namespace gpuos
