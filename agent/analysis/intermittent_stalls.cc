// Finding the stalled steps and what grew in them; see intermittent_stalls.h.
#include "analysis/intermittent_stalls.h"

#include <algorithm>
#include <cmath>

namespace gpuos {
namespace {

// Linear interpolation between the nearest ranks (as Distribution()).
double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = q * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

template <size_t N>
std::optional<size_t> LargestPositive(const std::array<int64_t, N>& values) {
  std::optional<size_t> best;
  for (size_t i = 0; i < N; ++i) {
    if (values[i] > 0 && (!best || values[i] > values[*best])) best = i;
  }
  return best;
}

// The stalled steps' stages and idle causes less as many typical steps'.
void SetGrowth(const StepRecord& stalled_total, IntermittentStalls& s) {
  const double n_stalled = static_cast<double>(s.stalled.size());
  const double per_typical = s.typical_steps ? 1.0 / s.typical_steps : 0;
  for (size_t i = 0; i < kStageCount; ++i) {
    s.stage_growth_ns[i] = std::llround(static_cast<double>(stalled_total.stages[i]) -
                                        n_stalled * per_typical * static_cast<double>(s.typical_total.stages[i]));
  }
  for (size_t i = 0; i < kIdleCauseCount; ++i) {
    s.idle_growth_ns[i] = std::llround(static_cast<double>(stalled_total.gpu_idle[i]) -
                                       n_stalled * per_typical * static_cast<double>(s.typical_total.gpu_idle[i]));
  }
}

// At the start, or every k-th step, from the stalled steps' ordinals among
// the measured steps.
void SetRecurrence(const std::vector<size_t>& ordinals, IntermittentStalls& s) {
  s.at_start = ordinals.back() == ordinals.size() - 1;
  if (!s.at_start && ordinals.size() >= 3) {
    const size_t gap = ordinals[1] - ordinals[0];
    bool regular = gap > 1;
    for (size_t k = 2; k < ordinals.size() && regular; ++k) regular = ordinals[k] - ordinals[k - 1] == gap;
    if (regular) s.every_nth = gap;
  }
}

}  // namespace

std::optional<Stage> IntermittentStalls::MainStage() const {
  auto i = LargestPositive(stage_growth_ns);
  if (!i) return std::nullopt;
  return static_cast<Stage>(*i);
}

std::optional<IdleCause> IntermittentStalls::MainIdleCause() const {
  auto i = LargestPositive(idle_growth_ns);
  if (!i) return std::nullopt;
  return static_cast<IdleCause>(*i);
}

int64_t IntermittentStalls::PositiveStageGrowthNs() const {
  int64_t sum = 0;
  for (int64_t g : stage_growth_ns) sum += std::max<int64_t>(g, 0);
  return sum;
}

IntermittentStalls FindIntermittentStalls(const StepAnalysis& a, StepPredicate explained_elsewhere) {
  IntermittentStalls s;
  std::vector<size_t> measured;  // positions of the measured steps
  for (size_t i = 0; i < a.steps.size(); ++i) {
    if (a.InSummaries(a.steps[i])) measured.push_back(i);
  }
  s.typical_total = a.measured_total;
  s.typical_wall_ns = a.measured_wall_ns;
  s.typical_steps = measured.size();
  if (measured.size() < kMinStepsForStalls) return s;
  s.steps_considered = measured.size();

  std::vector<double> durations;
  for (size_t i : measured) durations.push_back(static_cast<double>(a.steps[i].duration_ns()));
  std::sort(durations.begin(), durations.end());
  s.median_ns = Percentile(durations, 0.5);
  s.p90_ns = Percentile(durations, 0.9);
  std::vector<double> deviations;
  for (double d : durations) deviations.push_back(std::fabs(d - s.median_ns));
  std::sort(deviations.begin(), deviations.end());
  const double mad = Percentile(deviations, 0.5);
  if (s.median_ns <= 0) return s;
  s.threshold_ns = s.median_ns + std::max(kStallMinExcess * s.median_ns, kStallMadFactor * 1.4826 * mad);

  std::vector<size_t> ordinals;  // among the measured steps not explained elsewhere
  size_t ordinal = 0;
  for (size_t i : measured) {
    const StepRecord& step = a.steps[i];
    if (static_cast<double>(step.duration_ns()) <= s.threshold_ns) {
      ++ordinal;
    } else if (explained_elsewhere != nullptr && explained_elsewhere(step)) {
      s.explained.push_back(i);
    } else {
      s.stalled.push_back(i);
      ordinals.push_back(ordinal++);
    }
  }
  if (s.stalled.empty() && s.explained.empty()) return s;

  s.typical_total = StepRecord();
  s.typical_wall_ns = 0;
  s.typical_steps = 0;
  StepRecord stalled_total;
  size_t next = 0;
  size_t next_explained = 0;
  for (size_t i : measured) {
    const StepRecord& step = a.steps[i];
    if (next_explained < s.explained.size() && s.explained[next_explained] == i) {
      ++next_explained;
    } else if (next < s.stalled.size() && s.stalled[next] == i) {
      ++next;
      AddStepTotals(stalled_total, step);
      s.excess_ns += static_cast<uint64_t>(std::llround(static_cast<double>(step.duration_ns()) - s.median_ns));
    } else {
      AddStepTotals(s.typical_total, step);
      s.typical_wall_ns += step.duration_ns();
      ++s.typical_steps;
    }
  }
  s.share_of_run = a.measured_wall_ns ? static_cast<double>(s.excess_ns) / a.measured_wall_ns : 0;
  if (s.stalled.empty()) return s;

  SetGrowth(stalled_total, s);
  SetRecurrence(ordinals, s);
  return s;
}

}  // namespace gpuos
