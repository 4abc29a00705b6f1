// Left-out steps that recur at a period folded into iterations; see
// periodic_extra_work.h.
#include "analysis/periodic_extra_work.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/count_in_range.h"
#include "common/median.h"

namespace gpuos {
namespace {

// One step from each of `at` (one period k apart; the first within k of the
// start, the last within k of the end) to the next; the steps before the
// first make one step left out with `head_reason`.  Returns the period, 0
// when `at` is not such a series.
uint32_t FoldAt(std::vector<StepWindow>& steps, const std::vector<size_t>& at, const char* head_reason) {
  const size_t n = steps.size();
  if (at.size() < 3) return 0;
  const size_t k = at[1] - at[0];
  if (k < 2 || at[0] > k || n - at.back() > k) return 0;
  for (size_t j = 1; j < at.size(); ++j) {
    if (at[j] - at[j - 1] != k) return 0;
  }
  std::vector<StepWindow> folded;
  if (at[0] > 0) {
    StepWindow head;
    head.start_ns = steps[0].start_ns;
    head.end_ns = steps[at[0] - 1].end_ns;
    head.warmup = true;
    head.left_out = head_reason;
    folded.push_back(head);
  }
  for (size_t j = 0; j < at.size(); ++j) {
    const size_t last = std::min(at[j] + k, n) - 1;
    StepWindow w;
    w.index = j + 1;
    w.start_ns = steps[at[j]].start_ns;
    w.end_ns = steps[last].end_ns;
    if (last - at[j] + 1 < k) {
      w.warmup = true;
      w.left_out = absl::StrFormat("the job ended inside this iteration (%d of its %d repeats)", last - at[j] + 1, k);
    }
    folded.push_back(w);
  }
  if (steps[0].warmup) folded[0].warmup = true;
  steps = std::move(folded);
  return static_cast<uint32_t>(k);
}

}  // namespace

PeriodicFold FoldPeriodicExtraWork(std::vector<StepWindow>& steps, const std::vector<bool>& fetches) {
  const size_t n = steps.size();
  if (fetches.size() != n) return {};
  std::vector<size_t> at;
  uint64_t extra_ns = 0, wall_ns = 0;
  for (size_t i = 0; i < n; ++i) {
    if (steps[i].left_out.empty()) continue;
    if (fetches[i]) return {};
    at.push_back(i);
    extra_ns += steps[i].end_ns - steps[i].start_ns;
  }
  if (at.empty()) return {};
  for (size_t i = at[0]; i < n; ++i) wall_ns += steps[i].end_ns - steps[i].start_ns;
  if (3 * extra_ns < wall_ns) return {};
  PeriodicFold out;
  out.occurrences = static_cast<uint32_t>(at.size());
  out.share = static_cast<double>(extra_ns) / static_cast<double>(wall_ns);
  out.period = FoldAt(steps, at, "the iteration began before the first mark (its periodic work is not in the trace)");
  return out;
}

bool UnitHoldsNoBackwardPass(const std::vector<StepWindow>& steps, const std::vector<uint64_t>& backward_starts) {
  if (backward_starts.empty()) return false;
  size_t steady = 0, steady_training = 0, outside = 0;
  for (const StepWindow& w : steps) {
    const size_t starts = CountInRange(backward_starts, w.start_ns, w.end_ns);
    if (w.left_out.empty()) {
      ++steady;
      steady_training += starts > 0;
    } else {
      outside += starts;
    }
  }
  return steady > 0 && 20 * steady_training <= steady && outside >= kMinBackwardOutsideUnit;
}

PeriodicFold FoldAroundTrainingSteps(std::vector<StepWindow>& steps, const std::vector<uint64_t>& backward_starts) {
  if (!UnitHoldsNoBackwardPass(steps, backward_starts)) return {};
  std::vector<size_t> at;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool with_backward = CountInRange(backward_starts, steps[i].start_ns, steps[i].end_ns) > 0;
    if (!steps[i].left_out.empty() && with_backward) at.push_back(i);
  }
  PeriodicFold out;
  out.occurrences = static_cast<uint32_t>(at.size());
  out.period = FoldAt(steps, at, "before the first stretch with backward passes (a partial iteration)");
  return out;
}

PeriodicFold FoldExtraTrainingSteps(std::vector<StepWindow>& steps, const std::vector<uint64_t>& backward_starts) {
  if (backward_starts.empty()) return {};
  const size_t n = steps.size();
  std::vector<size_t> starts_in(n, 0);
  std::vector<size_t> steady;
  for (size_t i = 0; i < n; ++i) {
    starts_in[i] = CountInRange(backward_starts, steps[i].start_ns, steps[i].end_ns);
    if (steps[i].left_out.empty()) steady.push_back(starts_in[i]);
  }
  if (steady.empty()) return {};
  const size_t steady_starts = Median(steady);
  // Another update adds about a unit's backward passes (a generator's one
  // or two); many more, with no update of their own, are an evaluation that
  // adapts before it scores (MAML's torch.autograd.grad calls), left out.
  const size_t most_starts = 2 * std::max<size_t>(steady_starts, 1) + 1;
  std::vector<size_t> at;
  for (size_t i = 0; i < n; ++i) {
    if (!steps[i].left_out.empty() && starts_in[i] > steady_starts && starts_in[i] <= most_starts) at.push_back(i);
  }
  if (at.size() >= 4 && at[1] - at[0] != at[2] - at[1]) at.erase(at.begin());
  // Each iteration ends with the unit that holds the extra update.
  std::vector<size_t> after;
  for (size_t i : at) {
    if (i + 1 < n) after.push_back(i + 1);
  }
  PeriodicFold out;
  out.occurrences = static_cast<uint32_t>(at.size());
  out.period = FoldAt(steps, after, "before the first stretch with the extra update (a partial iteration)");
  return out;
}

}  // namespace gpuos
