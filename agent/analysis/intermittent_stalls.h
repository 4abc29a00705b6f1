// Intermittent stalls: measured steps much longer than the median step (a
// data wait in one step in ten, a checkpoint every hundred), what they cost
// the run, and what grew in them.  A mean over all steps hides them -- ten
// percent of steps three times as long make a GPU-bound job look like one
// with "no single dominant bottleneck" -- so the diagnosis judges the
// typical step without them and names the stalls as a finding of their own.
//
// A measured step is stalled when it is longer than
//   median + max(kStallMinExcess x median, kStallMadFactor x 1.4826 x MAD),
// MAD the median absolute deviation of step time (1.4826 x MAD estimates
// the standard deviation of normal jitter without letting the stalls
// inflate it).  Half the steps at most can be stalled, so the median is a
// typical step.  Their cost is what bringing them to the median would save:
// the sum of (duration - median) over the stalled steps, as a share of the
// measured steps' wall time (= how much shorter the mean step would be).
// Long steps another finding names (those that started DataLoader workers
// again, worker_restarts.h) are set apart as `explained`: neither stalls
// nor typical steps, so one cost is not reported twice.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/gpu_idle_attribution.h"
#include "analysis/step_analysis.h"
#include "analysis/step_stages.h"

namespace gpuos {

inline constexpr size_t kMinStepsForStalls = 5;
inline constexpr double kStallMinExcess = 0.25;
inline constexpr double kStallMadFactor = 3.0;

struct IntermittentStalls {
  size_t steps_considered = 0;  // measured steps; 0 when too few to tell a tail
  double median_ns = 0;
  double p90_ns = 0;
  double threshold_ns = 0;
  std::vector<size_t> stalled;  // positions in StepAnalysis::steps, in order
  std::vector<size_t> explained;  // steps over the threshold that another finding names
  // > 0 when the stalled steps recur at a fixed interval of measured steps
  // (at least three of them): every k-th step.
  size_t every_nth = 0;
  // The stalled steps are the first measured steps, one after another: a
  // start-up cost (compilation, autotuning, workers starting), not a
  // recurring one.
  bool at_start = false;
  uint64_t excess_ns = 0;   // sum of (duration - median) over the stalled steps
  double share_of_run = 0;  // excess_ns / the measured steps' wall time

  // What grew in the stalled steps: per stage and per GPU-idle cause, the
  // stalled steps' time minus as many typical steps' mean (ns; negative
  // when it shrank).
  std::array<int64_t, kStageCount> stage_growth_ns{};
  std::array<int64_t, kIdleCauseCount> idle_growth_ns{};

  // The measured steps that are not stalled, summed: the typical step.
  StepRecord typical_total;
  uint64_t typical_wall_ns = 0;
  size_t typical_steps = 0;

  bool found() const { return !stalled.empty(); }
  // The stage / idle cause that grew most, if any grew.
  std::optional<Stage> MainStage() const;
  std::optional<IdleCause> MainIdleCause() const;
  // Sum of the positive stage growths: what the shares of growth refer to.
  int64_t PositiveStageGrowthNs() const;
};

// `explained_elsewhere`, when given, tells the long steps another finding
// names; the threshold is still taken over all measured steps.
using StepPredicate = bool (*)(const StepRecord&);
IntermittentStalls FindIntermittentStalls(const StepAnalysis& analysis,
                                          StepPredicate explained_elsewhere = nullptr);

}  // namespace gpuos
