// An epoch's end cut out of its step; see epoch_end_split.h.
#include "analysis/epoch_end_split.h"

#include <algorithm>
#include <iterator>

#include "analysis/step_extra_work.h"
#include "analysis/step_split.h"
#include "common/count_in_range.h"
#include "common/median.h"

namespace gpuos {

namespace {

// Where the data-loader range that holds `t` starts (the Python hook's
// `iter(loader)`), else `t`.
uint64_t BackToDataRange(uint64_t t, const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges) {
  auto range = std::upper_bound(data_ranges.begin(), data_ranges.end(), t,
                                [](uint64_t x, const std::pair<uint64_t, uint64_t>& r) { return x < r.first; });
  return range != data_ranges.begin() && std::prev(range)->second > t ? std::prev(range)->first : t;
}

}  // namespace

size_t EndEpochsInGroups(std::vector<StepWindow>& steps, const std::vector<uint64_t>& forks,
                         const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges,
                         const std::vector<uint64_t>& backward_starts,
                         const std::function<uint64_t(uint64_t, uint64_t)>& cpu_ns) {
  // The step's last backward start, where it begins at one and holds more.
  const auto last_backward = [&](const StepWindow& w) -> uint64_t {
    if (!std::binary_search(backward_starts.begin(), backward_starts.end(), w.start_ns)) return 0;
    auto b = std::lower_bound(backward_starts.begin(), backward_starts.end(), w.end_ns);
    return b == backward_starts.begin() || *std::prev(b) <= w.start_ns ? 0 : *std::prev(b);
  };
  std::vector<uint64_t> tails;
  for (const StepWindow& s : steps) {
    const uint64_t last = last_backward(s);
    if (s.warmup || !s.left_out.empty() || last == 0 || CountInRange(forks, s.start_ns, s.end_ns) > 0) continue;
    tails.push_back(cpu_ns(last, s.end_ns));
  }
  if (tails.empty()) return 0;
  const uint64_t steady_tail = Median(tails);
  size_t ended = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    StepWindow& w = steps[k];
    const uint64_t last = last_backward(w);
    if (w.warmup || !w.left_out.empty() || last == 0) continue;
    auto fork = std::upper_bound(forks.begin(), forks.end(), last);
    if (fork == forks.end() || *fork >= w.end_ns) continue;
    const uint64_t cut = std::max(last, BackToDataRange(*fork, data_ranges));
    if (cpu_ns(last, cut) < kMinCpuExtraNs + steady_tail) continue;
    w.warmup = true;
    w.left_out =
        "the end of an epoch: the group's update and the loop's work after it (an evaluation pass, a "
        "checkpoint?) before the next epoch's DataLoader started its workers; the next step begins there";
    if (k + 1 < steps.size() && steps[k + 1].start_ns == w.end_ns) steps[k + 1].start_ns = cut;
    w.end_ns = cut;
    ++ended;
  }
  return ended;
}

size_t SplitAtEpochStarts(std::vector<StepWindow>& steps, const std::vector<uint64_t>& forks,
                          const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges,
                          const std::vector<uint64_t>& backward_starts,
                          const std::function<uint64_t(uint64_t, uint64_t)>& cpu_ns) {
  if (forks.empty() || backward_starts.empty() || steps.empty()) return 0;
  const auto first_backward_after = [&](const StepWindow& w) {
    auto b = std::upper_bound(backward_starts.begin(), backward_starts.end(), w.start_ns);
    return b == backward_starts.end() || *b > w.end_ns ? uint64_t{0} : *b;
  };
  // What a step that did not fork runs before its backward pass: the
  // previous update's tail and the forward pass, or, where steps begin at
  // backward starts, the whole step.  Taken only where a step forked (most
  // traces' steps never do).
  uint64_t steady_cpu = UINT64_MAX;
  const auto steady_cpu_before_backward = [&] {
    if (steady_cpu == UINT64_MAX) {
      std::vector<uint64_t> before;
      for (const StepWindow& s : steps) {
        const uint64_t backward = first_backward_after(s);
        if (s.warmup || !s.left_out.empty() || backward == 0 || CountInRange(forks, s.start_ns, s.end_ns) > 0) {
          continue;
        }
        before.push_back(cpu_ns(s.start_ns, backward));
      }
      steady_cpu = Median(before);
    }
    return steady_cpu;
  };
  std::vector<uint64_t> cut_at(steps.size(), 0);
  size_t split = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    StepWindow& w = steps[k];
    if (w.warmup || !w.left_out.empty()) continue;
    const uint64_t first_backward = first_backward_after(w);
    if (first_backward == 0) continue;
    auto fork = std::lower_bound(forks.begin(), forks.end(), w.start_ns);
    if (fork == forks.end() || *fork >= first_backward) continue;
    const uint64_t cut = BackToDataRange(*fork, data_ranges);
    if (cut <= w.start_ns || cpu_ns(w.start_ns, cut) < kMinCpuExtraNs + steady_cpu_before_backward()) continue;
    w.warmup = true;
    w.left_out =
        "the end of an epoch: the loop's work after its last update and before the next epoch's DataLoader "
        "started its workers (an evaluation pass, a checkpoint?); the iteration after it, from the workers' "
        "start on, is measured on its own";
    cut_at[k] = cut;
    ++split;
  }
  if (split > 0) SplitStepsAt(steps, cut_at, "");
  return split;
}

}  // namespace gpuos
