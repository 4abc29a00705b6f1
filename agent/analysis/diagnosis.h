// Names the dominant bottleneck of the measured steps, with the numbers
// that show it, what fixing it would gain and what to change -- the
// reasoning users do by hand in the Nsight Systems articles and the ECS 251
// study.  The diagnosis is a table of rules (DiagnosisRules()); each rule
// is one function that reads the step analysis and returns a finding or
// nothing.  Adding a rule = one function + one table entry (+ a Bottleneck).
//
// Every finding carries
//   score  the share of step time it explains (picks the primary finding);
//   gain   how much shorter the mean step would be without it, as a share
//          of the mean step, by the model named in gain_model (quoted in
//          the evidence); unset where the trace cannot tell.  Gains of
//          different findings overlap: they do not add up.
//
// Steady-state rules, over the measured steps' summed wall time W unless
// said otherwise:
//   gpu_bound           kernels run >= kGpuBoundKernelShare of the typical
//                       step (the measured steps without intermittent
//                       stalls, intermittent_stalls.h; all of them when
//                       there are none).  score: kernel share of W.  gain:
//                       not estimated (it is the kernel time saved).
//   data_loader         the launching thread waits in data fetches >=
//                       kDataWaitShare of W and the GPU is idle >=
//                       kGpuIdleHighShare of W -- or the data-loading stage
//                       (GPU idle waiting for data, however the attribution
//                       knew it) is >= kDataWaitShare of W.  score and gain:
//                       exposed data loading (the stage, step_stages.h)
//                       removed.
//   pageable_copies     the thread sits in pageable cudaMemcpy calls or in
//                       mmap/munmap while no kernel runs >= kPageableShare of
//                       W, with at least one pageable copy.  score and gain:
//                       that exposed time removed.
//   serialized_copies   the GPU copies with no kernel running >=
//                       kSerializedCopyShare of W -- or >=
//                       kSerializedCopyBusyGpuShare both of W and of the
//                       median measured step (the copies cost every step,
//                       not a few stalled ones) -- and host-to-device copies
//                       share streams with kernels (>= kSameStreamFraction of
//                       their time) or hardly overlap kernels (<
//                       kCopyOverlapFraction).  score and gain: copy-only
//                       time hidden behind compute.  Beside gpu_bound it
//                       comes first: hiding the copies (a copy stream) is the
//                       cheap gain, kernel work the expensive one (on an H200
//                       the ResNet-18 sequence gained the 6% its copies took).
//   launch_bound        the GPU is idle >= kGpuIdleHighShare of W, >=
//                       kLaunchBoundCpuFraction of that idle time the thread
//                       is launching, in other CUDA calls or running other
//                       code, kernels average <= kShortKernelNs and there are
//                       >= kMinKernelsPerStep per step.  score: that idle
//                       time / W.  gain: eager, CUDA graphs halve that idle
//                       time (kGraphIdleReduction); graphs already replayed,
//                       the idle in the launch calls still outside graphs
//                       (not estimated when there are none).  With
//                       >= kStepSplittingSyncs syncs per step between the
//                       thread's launches (ApiCounts::syncs_between_launches)
//                       a graph cannot span the step: the recommendation
//                       names the syncs first, the gain waits on them.
//   host_cpu_work       the GPU is idle >= kGpuIdleHighShare of W and for
//                       >= kHostWorkShare of W the thread runs its own code
//                       away from CUDA calls (more than kHostWorkGapNs with
//                       none, ending in a copy to the device: an RL
//                       environment's steps, a batch made in the loop),
//                       which launch_bound does not count (its evidence
//                       names it).  Shorter stretches, and long ones that
//                       end in a launch (an optimizer's Python-side
//                       bookkeeping), cannot be told from the framework's
//                       code and stay launch_bound's.  score: that idle
//                       time / W.  gain: not estimated (how much of that
//                       work can leave the loop or overlap the GPU is the
//                       job's design).
//   worker_process_wait the data-loading stage (GPU idle while the thread
//                       waited on the job's worker processes) is >=
//                       kDataWaitShare of W, and the processes are not a
//                       DataLoader's: none is named like its workers
//                       (PyTorch 2.3 and later name them pt_data_worker)
//                       and the Python hook ran but marked no data fetch
//                       (vectorized environments in subprocesses, a
//                       simulator).  data_loader then stays silent.  Where
//                       the trace cannot tell (unnamed workers, no hook),
//                       data_loader fires and says so.  score and gain:
//                       that stage removed.
//   allocator_churn     the launching thread makes >= kChurnAllocationsPerStep
//                       calls per step that take memory from the driver or
//                       give it back (cudaMalloc, cudaFree:
//                       ApiCounts::allocations), in >= kChurnStepShare of
//                       the measured steps, and the GPU idle inside them
//                       and in the idle stretches that began inside them
//                       (GpuParts::idle_allocation_ns: a free drains the
//                       GPU's queue) is >= kAllocatorChurnShare of W.  score
//                       and gain: that idle removed -- a lower bound: a free
//                       also takes the CPU's lead over the GPU, and the
//                       CPU-side idle that follows in the step is not
//                       counted (on an H200 the churn cost 14% and 37% of
//                       the churning step where this idle read 4% and
//                       15-17%).  launch_bound
//                       judges the idle left without it (no CUDA graph
//                       removes it) and, when the frees drain the queue every
//                       step, says its own reading waits for the churn to go.
//   dataloader_worker_restarts
//                       measured steps in which the launching process
//                       started processes (a DataLoader's iterator made
//                       anew at each epoch without persistent_workers:
//                       worker_restarts.h) take, beyond the median of the
//                       other steps, >= kWorkerRestartShare of W.  score
//                       and gain: those steps brought to that median.
//                       data_loader judges the data loading besides them.
//   cpu_contention      the thread is preempted or waits in the run queue
//                       >= kContentionShare of W while >= kManyWorkers
//                       data-worker processes run.  score: that share.  gain:
//                       the part of it that left the GPU idle.
//   straggler           in a distributed job, the other ranks wait in
//                       collectives for one rank (straggler.h).  score and
//                       gain: their wait per step over their mean step.
//                       Also beside a trace with no GPU activity.
// Tail rule:
//   intermittent_stalls stalled steps (intermittent_stalls.h) cost >=
//                       kStallCostShare of the run.  score and gain: stalled
//                       steps brought to the median step.  When they are
//                       the run's first measured steps it says so: a
//                       start-up cost, not a recurring one.
//
// The primary finding is the steady-state finding with the highest score
// (serialized copies before gpu_bound; allocator churn first when its frees
// drain the GPU's queue every step, since the rest of the step's GPU-idle
// picture follows from that drain), so it describes the typical step;
// intermittent stalls are primary only when no steady-state rule fired, and
// are named in the headline beside the primary ("GPU-bound, with
// intermittent data stalls costing 17.7% of the run").  The other findings
// follow, ranked by gain.  With no finding, a stage that takes more than
// kDominantStageShare of the step is named (dominant_stage); only when none
// does is there "no single dominant bottleneck".
//
// Recommendations read what the job already does (job_practices.h): CUDA
// graphs replayed, pinned or asynchronous copies, a copy stream, data
// workers at the host's CPU count -- and then say what is left.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/intermittent_stalls.h"
#include "analysis/step_analysis.h"
#include "analysis/straggler.h"

namespace gpuos {

inline constexpr double kGpuBoundKernelShare = 0.90;
inline constexpr double kDataWaitShare = 0.30;
inline constexpr double kGpuIdleHighShare = 0.30;
inline constexpr double kPageableShare = 0.15;
inline constexpr double kSerializedCopyShare = 0.10;
inline constexpr double kSerializedCopyBusyGpuShare = 0.03;
inline constexpr double kSameStreamFraction = 0.50;
inline constexpr double kCopyOverlapFraction = 0.20;
inline constexpr double kLaunchBoundCpuFraction = 0.50;
inline constexpr double kHostWorkShare = 0.15;
inline constexpr uint64_t kShortKernelNs = 50'000;
inline constexpr double kMinKernelsPerStep = 8;
// Syncs between launches per step from which a step is in pieces no one
// graph spans; a loss read back once a step splits it at most once.
inline constexpr double kStepSplittingSyncs = 2;
inline constexpr double kChurnAllocationsPerStep = 1;
inline constexpr double kAllocatorChurnShare = 0.03;
inline constexpr double kChurnStepShare = 0.5;  // of the measured steps make an allocation call
inline constexpr double kWorkerRestartShare = 0.03;
inline constexpr double kContentionShare = 0.10;
inline constexpr uint32_t kManyWorkers = 2;
inline constexpr double kStallCostShare = 0.05;
inline constexpr double kDominantStageShare = 0.40;
// The share of CPU-side GPU idle a CUDA graph replay is assumed to remove.
inline constexpr double kGraphIdleReduction = 0.5;
// A job whose GPU idle lies within this fraction of kGpuIdleHighShare reads
// launch-bound in one run and not in the next (the CPU side of a step
// spreads +-15% between runs on GPU hosts): the finding says so, and so
// does the fallback when launch-bound missed by that little.
inline constexpr double kNearThresholdFraction = 0.2;

enum class Bottleneck {
  kNoSteps,         // nothing to diagnose
  kNoGpuActivity,   // steps, but no GPU work recorded for the process
  kNoneDominant,    // no rule fired and no stage takes > kDominantStageShare
  kGpuBound,
  kDataLoader,
  kPageableCopies,
  kSerializedCopies,
  kLaunchBound,
  kHostCpuWork,     // the thread's own CPU work away from CUDA calls leaves the GPU idle
  kCpuContention,
  kIntermittentStalls,
  kDominantStage,   // no rule fired, but one stage takes > kDominantStageShare
  kStraggler,       // the other ranks wait for one rank (straggler.h)
  kWorkerProcesses, // waiting for the job's worker processes, which are not a DataLoader's
  kAllocatorChurn,  // GPU memory taken from the driver and given back every step
  kWorkerRestarts,  // a DataLoader's workers started again at every epoch
};

const char* BottleneckKey(Bottleneck bottleneck);    // "data_loader_starvation"
const char* BottleneckTitle(Bottleneck bottleneck);  // "data-loader starvation"

struct Finding {
  Bottleneck bottleneck = Bottleneck::kNoSteps;
  double score = 0;            // share of step time the finding explains
  std::optional<double> gain;  // share of the mean step it would save; unset: not estimated
  std::string gain_model;      // how `gain` was estimated, or why it was not
  std::string evidence;
  std::string recommendation;
  // This rule fired within kNearThresholdFraction of its threshold.
  bool near_threshold = false;
  // No rule fired; this one would have, with its threshold
  // kNearThresholdFraction lower.
  std::optional<Bottleneck> near_miss;
};

struct Diagnosis {
  Finding primary;
  std::vector<Finding> secondary;  // other findings, by gain (unestimated last)
  // One line: the primary's title, and the intermittent stalls' cost beside
  // it when they are a secondary finding.
  std::string headline;
  IntermittentStalls stalls;  // the tail analysis behind intermittent_stalls
};

// What every rule reads: the analysis and its tail.
struct DiagnosisInputs {
  const StepAnalysis& analysis;
  const IntermittentStalls& stalls;
  const Straggler* straggler = nullptr;  // a distributed job's (rank_analysis.h)

  const StepRecord& total() const { return analysis.measured_total; }
  uint64_t wall_ns() const { return analysis.measured_wall_ns; }
  size_t steps() const { return analysis.measured_steps; }
  double Share(uint64_t part) const;  // of the measured wall time
  double PerStep(uint64_t total) const;
  uint64_t Idle(IdleCause cause) const { return total().gpu_idle[static_cast<size_t>(cause)]; }
};

using DiagnosisRuleFn = std::optional<Finding> (*)(const DiagnosisInputs&);

struct DiagnosisRule {
  Bottleneck bottleneck;
  DiagnosisRuleFn test;
  bool steady_state;  // describes the typical step (may be primary first)
};

// Every rule, in the order ties of equal score are broken.
const std::vector<DiagnosisRule>& DiagnosisRules();

// The rules (diagnosis_rules.cc and the *_rule.cc files beside it); see the
// table above.
std::optional<Finding> GpuBoundRule(const DiagnosisInputs& in);
std::optional<Finding> DataLoaderRule(const DiagnosisInputs& in);
std::optional<Finding> PageableCopiesRule(const DiagnosisInputs& in);
std::optional<Finding> SerializedCopiesRule(const DiagnosisInputs& in);
std::optional<Finding> LaunchBoundRule(const DiagnosisInputs& in);
// LaunchBoundRule with the GPU-idle threshold `idle_share` in place of
// kGpuIdleHighShare (the fallback's near miss).
std::optional<Finding> LaunchBoundRuleAt(const DiagnosisInputs& in, double idle_share);
std::optional<Finding> HostCpuWorkRule(const DiagnosisInputs& in);
std::optional<Finding> WorkerProcessesRule(const DiagnosisInputs& in);
std::optional<Finding> AllocatorChurnRule(const DiagnosisInputs& in);
// The churn rule fires and its frees drain the GPU's queue every step: it
// is named first, and launch-bound's advice waits for it.
bool AllocatorChurnComesFirst(const DiagnosisInputs& in);
std::optional<Finding> WorkerRestartRule(const DiagnosisInputs& in);
// The restarts WorkerRestartRule fires on (worker_restarts.h), empty when
// it does not: what data_loader leaves to it.
struct WorkerRestarts;
WorkerRestarts WorkerRestartsThatCount(const DiagnosisInputs& in);
std::optional<Finding> CpuContentionRule(const DiagnosisInputs& in);
std::optional<Finding> IntermittentStallsRule(const DiagnosisInputs& in);
std::optional<Finding> StragglerRule(const DiagnosisInputs& in);

// "data" for the data-loading stage: what intermittent stalls of that stage
// are called ("intermittent data stalls"); "" when the stage has no word.
const char* StallKindWord(Stage stage);

// `straggler`: the distributed job's, when the trace has ranks.
Diagnosis Diagnose(const StepAnalysis& analysis, const Straggler* straggler = nullptr);

}  // namespace gpuos
