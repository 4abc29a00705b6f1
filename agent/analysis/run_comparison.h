// Several recordings of one job side by side (`gpuos-trace compare`, issue
// 22): each run reduced to the numbers a scenario table shows (throughput,
// step time, stages, GPU idle by cause, OS costs per step, diagnosis),
// deltas against the first run with the stage whose change explains most of
// the step-time change, and, for runs that step through one setting, the
// knee: the value past which the step time stops improving.
//
// Numbers per step come from the measured steps (the report's summaries)
// where the step analysis has them per step: stages, GPU idle, switches
// and run-queue time by role, the driving thread's page faults and
// mmap/munmap, kernels.  Numbers the OS summary has only for the whole
// recording (futex waits, every syscall, the data workers' page faults) are
// divided by the number of steps found; they include start-up and shutdown,
// and their names say "whole trace".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"

namespace gpuos {

struct RoleSwitches {  // per measured step
  double switches = 0;  // voluntary + involuntary
  double involuntary = 0;
  double runqueue_ns = 0;
};

struct RunOsPerStep {
  RoleSwitches driving;  // the driving thread
  RoleSwitches workers;  // data workers
  RoleSwitches others;   // every other traced thread
  double page_faults = 0;  // the driving thread
  double mmap_calls = 0;   // the driving thread
  double mmap_ns = 0;
  double munmap_calls = 0;
  double munmap_ns = 0;
  // Whole trace, divided by the steps found.
  double futex_waits = 0;  // every traced thread
  double futex_wait_ns = 0;
  double worker_page_faults = 0;  // threads of the data workers
};

struct SyscallPerStep {
  std::string name;
  double calls = 0;  // whole trace, divided by the steps found
  double ns = 0;
};

// One run, reduced.  `failed` set: the run has no numbers, only why.
struct RunFacts {
  std::string name;
  std::string path;
  std::vector<std::string> argv;  // the traced command (launch mode)
  std::string failed;  // "failed: exit 3"; empty for a run that was analyzed
  // What the trace lost (damaged, incomplete, dropped events): its numbers
  // cover less than the run.  Empty for a whole trace.
  std::string warning;
  bool has_steps = false;
  size_t steps = 0;           // found
  size_t measured_steps = 0;  // kept for the summaries
  std::string step_source;    // how the steps were found (StepSourceName)
  double steps_per_s = 0;     // measured steps / their summed wall time
  std::optional<uint64_t> batch_size;
  std::string batch_size_source;  // "given", "command line --batch-size"
  std::optional<double> samples_per_s;
  double step_mean_ns = 0;
  double step_p50_ns = 0;
  double step_p95_ns = 0;
  std::array<double, kStageCount> stage_ns{};  // per measured step
  std::array<double, kStageCount> stage_pct{};  // of the measured wall time
  std::array<double, kIdleCauseCount> gpu_idle_pct{};
  double gpu_idle_total_pct = 0;
  RunOsPerStep os;
  std::vector<SyscallPerStep> top_syscalls;  // by time, at most kTopSyscalls
  double kernels_per_step = 0;
  uint64_t launch_delay_p50_ns = 0;  // whole trace; 0 without kernels with launches
  uint64_t launch_delay_p95_ns = 0;
  std::string bottleneck;  // BottleneckKey of the primary finding
  std::string headline;
  std::optional<double> gain_pct;

  // Has numbers to compare: not failed, with measured steps.
  bool analyzed() const { return failed.empty() && measured_steps > 0 && step_mean_ns > 0; }
};

inline constexpr size_t kTopSyscalls = 5;

// What a run's command line says the batch size is: `--batch-size N`,
// `--batch_size N`, `--bs N` (or `=N`), the last one given.
std::optional<uint64_t> BatchSizeFromCommand(const std::vector<std::string>& argv);

// `batch_size` overrides what the command line says.
RunFacts ReduceRun(const std::string& name, const std::string& path, const TraceSummary& summary,
                   const StepAnalysis& steps, const Diagnosis& diagnosis, std::optional<uint64_t> batch_size);

// A run against the first (analyzed) run.
struct RunDelta {
  std::string name;
  std::string baseline;
  double step_mean_ns = 0;  // this run's minus the baseline's
  double step_mean_pct = 0;  // of the baseline's mean step
  double steps_per_s_pct = 0;
  std::array<double, kStageCount> stage_ns{};  // per step
  // The stage with the largest absolute change per step, and its change as
  // a share of the change of the mean step (over 100% when other stages
  // moved the other way).
  std::optional<Stage> explaining_stage;
  double explaining_share_pct = 0;
  std::string line;  // says the above in one sentence
};

// The setting past which the mean step improves by less than `threshold`
// (0.05: 5%) from one run to the next, runs taken in the order given;
// failed runs are skipped.  What grew from the knee to the last run says
// what the extra setting cost.
struct Knee {
  bool found = false;
  std::string at;           // the run's name
  double threshold = 0;
  double next_improvement = 0;  // from the knee to the next run, share of the knee's step
  std::string note;         // why there is no knee, or what it means
  struct Growth {
    std::string what;  // "worker context switches per step"
    double at_knee = 0;
    double at_last = 0;
  };
  std::vector<Growth> grew;  // from the knee to the last run
};

struct Comparison {
  std::vector<RunFacts> runs;
  std::vector<RunDelta> deltas;  // one per analyzed run after the first
  std::optional<Knee> knee;      // set when asked for
};

std::vector<RunDelta> DeltasAgainstFirst(const std::vector<RunFacts>& runs);
Knee FindKnee(const std::vector<RunFacts>& runs, double threshold);

}  // namespace gpuos
