#include "analysis/loader_restart.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "common/median.h"

namespace gpuos {
namespace {

bool Measured(const StepWindow& w) { return !w.warmup && w.left_out.empty(); }

// The step's last backward start, or 0 with none inside it.
uint64_t LastBackwardStart(const std::vector<uint64_t>& backward_starts, const StepWindow& w) {
  auto after = std::lower_bound(backward_starts.begin(), backward_starts.end(), w.end_ns);
  if (after == backward_starts.begin() || *std::prev(after) < w.start_ns) return 0;
  return *std::prev(after);
}

// The first of the `waits` (sorted by start) starting at or after `t`.
std::vector<LoopWait>::const_iterator FirstWaitFrom(const std::vector<LoopWait>& waits, uint64_t t) {
  return std::lower_bound(waits.begin(), waits.end(), t, [](const LoopWait& w, uint64_t v) { return w.start_ns < v; });
}

// The waits in `waits` by `training` workers that start in [from, to): their
// sum, and the first one's start (0: none).
struct WaitsIn {
  uint64_t total_ns = 0;
  uint64_t first_ns = 0;
};
WaitsIn TrainingWaitsIn(const std::vector<LoopWait>& waits, const absl::flat_hash_set<uint32_t>& training,
                        uint64_t from, uint64_t to) {
  WaitsIn in;
  for (auto it = FirstWaitFrom(waits, from); it != waits.end() && it->start_ns < to; ++it) {
    if (!training.contains(it->waker_pid)) continue;
    if (in.first_ns == 0) in.first_ns = it->start_ns;
    in.total_ns += std::min(it->end_ns, to) - it->start_ns;
  }
  return in;
}

// The worker processes that ended a wait of the loop's in at least
// kMinRestartWorkerSteps measured steps.
absl::flat_hash_set<uint32_t> TrainingWorkers(const std::vector<StepWindow>& steps, const std::vector<LoopWait>& waits,
                                              const absl::flat_hash_set<uint32_t>& worker_pids) {
  absl::flat_hash_map<uint32_t, size_t> steps_woken;
  for (const StepWindow& w : steps) {
    if (!Measured(w)) continue;
    absl::flat_hash_set<uint32_t> here;
    for (auto it = FirstWaitFrom(waits, w.start_ns); it != waits.end() && it->start_ns < w.end_ns; ++it) {
      if (worker_pids.contains(it->waker_pid)) here.insert(it->waker_pid);
    }
    for (uint32_t pid : here) ++steps_woken[pid];
  }
  absl::flat_hash_set<uint32_t> training;
  for (const auto& [pid, n] : steps_woken) {
    if (n >= kMinRestartWorkerSteps) training.insert(pid);
  }
  return training;
}

}  // namespace

size_t MoveLoaderRestarts(std::vector<StepWindow>& steps, const std::vector<size_t>& marked,
                          const std::vector<uint64_t>& backward_starts, const std::vector<LoopWait>& waits,
                          const absl::flat_hash_set<uint32_t>& worker_pids, uint64_t* restart_wait_ns) {
  if (marked.empty() || waits.empty() || backward_starts.empty() || worker_pids.empty()) return 0;
  const absl::flat_hash_set<uint32_t> training = TrainingWorkers(steps, waits, worker_pids);
  if (training.empty()) return 0;
  std::vector<uint64_t> steady;
  for (const StepWindow& w : steps) {
    const uint64_t last_backward = LastBackwardStart(backward_starts, w);
    if (Measured(w) && last_backward != 0) {
      steady.push_back(TrainingWaitsIn(waits, training, last_backward, w.end_ns).total_ns);
    }
  }
  if (steady.empty()) return 0;
  const uint64_t steady_ns = Median(steady);
  size_t moved = 0;
  for (size_t k : marked) {
    if (k + 1 >= steps.size() || steps[k].end_ns != steps[k + 1].start_ns) continue;
    StepWindow& w = steps[k];
    const uint64_t last_backward = LastBackwardStart(backward_starts, w);
    if (last_backward == 0) continue;
    const WaitsIn restart = TrainingWaitsIn(waits, training, last_backward, w.end_ns);
    if (restart.first_ns == 0 || restart.total_ns < steady_ns + kMinCpuExtraNs) continue;
    if (restart_wait_ns != nullptr) *restart_wait_ns += restart.total_ns;
    absl::StrAppendFormat(&w.left_out,
                          "; the next epoch's DataLoader restart at its end (%.3f ms of waits for its workers) is "
                          "measured with the next step",
                          static_cast<double>(restart.total_ns) / 1e6);
    w.end_ns = restart.first_ns;
    steps[k + 1].start_ns = restart.first_ns;
    ++moved;
  }
  return moved;
}

}  // namespace gpuos
