// Choosing the driving thread by who waits for whom; see driving_thread.h.
#include "analysis/driving_thread.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/thread_roles.h"

namespace gpuos {

bool StepsNameTheirThread(StepSource source) {
  return source == StepSource::kNvtxRanges || source == StepSource::kOptimizerSteps ||
         source == StepSource::kBackwardRanges || source == StepSource::kBackwardUprobe ||
         source == StepSource::kBackwardGroups;
}

DrivingChoice ChooseDrivingThread(const ThreadActivity& activity, const StepPlan& plan,
                                  const absl::flat_hash_set<uint32_t>& helpers) {
  DrivingChoice choice;
  if (plan.pid == 0) return choice;
  std::vector<uint32_t> candidates;
  for (const auto& [tid, facts] : activity.threads()) {
    if (facts.pid != plan.pid || plan.IsWorker(facts.pid, tid)) continue;
    if (RoleFromComm(facts.comm) != ThreadRole::kOther || helpers.contains(tid)) continue;
    candidates.push_back(tid);
  }
  const bool any_cuda = std::any_of(candidates.begin(), candidates.end(),
                                    [&](uint32_t tid) { return activity.Find(tid)->cuda_calls > 0; });
  if (any_cuda) {
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](uint32_t tid) { return activity.Find(tid)->cuda_calls == 0; }),
                     candidates.end());
  }
  // Waits ended by others, per candidate, and by whom most.
  absl::flat_hash_map<uint32_t, uint64_t> score;
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint64_t>> top_waker;
  for (const auto& [key, edge] : activity.wakes()) {
    score[key.first] += edge.count;
    auto& top = top_waker[key.first];
    if (edge.count > top.second) top = {key.second, edge.count};
  }
  auto in = [&](uint32_t tid) { return std::find(candidates.begin(), candidates.end(), tid) != candidates.end(); };
  std::vector<uint32_t> fed;
  for (uint32_t tid : candidates) {
    const ThreadFacts* f = activity.Find(tid);
    auto top = top_waker.find(tid);
    if (f->cuda_calls == 0 && top != top_waker.end() && top->second.first != tid && in(top->second.first) &&
        2 * top->second.second > f->woken_by_threads) {
      fed.push_back(tid);
    }
  }
  if (fed.size() < candidates.size()) {
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](uint32_t tid) { return std::find(fed.begin(), fed.end(), tid) != fed.end(); }),
                     candidates.end());
  }
  if (candidates.empty()) return choice;
  uint64_t best_score = 0;
  for (uint32_t tid : candidates) best_score = std::max(best_score, score[tid]);
  const double floor = best_score * (1 - kDrivingScoreMargin);
  uint32_t best = 0;
  for (uint32_t tid : candidates) {
    if (static_cast<double>(score[tid]) < floor) continue;
    if (best == 0) {
      best = tid;
      continue;
    }
    const bool main = tid == plan.pid, best_main = best == plan.pid;
    if (main != best_main) {
      if (main) best = tid;
      continue;
    }
    const uint64_t calls = activity.Find(tid)->cuda_calls, best_calls = activity.Find(best)->cuda_calls;
    if (calls != best_calls ? calls > best_calls : tid < best) best = tid;
  }
  const ThreadFacts* f = activity.Find(best);
  choice.chosen = true;
  choice.pid = plan.pid;
  choice.tid = best;
  choice.comm = f->comm;
  choice.why = absl::StrFormat(
      "the thread of pid %u whose waits other threads ended most often (%d times) among %d that %s, "
      "helpers (autograd, pin-memory, CUDA's, pool threads and data workers) left out%s",
      plan.pid, score[best], candidates.size(), any_cuda ? "made CUDA calls" : "were not fed by another",
      best == plan.pid ? "; the process's main thread" : "");
  return choice;
}

std::string ApplyDrivingThread(const ThreadActivity& activity, StepPlan& plan,
                               const absl::flat_hash_set<uint32_t>& helpers) {
  if (plan.steps.empty()) return std::string();
  if (StepsNameTheirThread(plan.source)) {
    return absl::StrCat("thread ", plan.tid, " \"", plan.thread_comm, "\": the thread of the step marks");
  }
  DrivingChoice choice = ChooseDrivingThread(activity, plan, helpers);
  if (!choice.chosen) {
    return absl::StrCat("thread ", plan.tid, " \"", plan.thread_comm,
                        "\": kept from the step finder (no thread of its process qualifies by who waits for whom)");
  }
  std::string before;
  if (choice.tid != plan.tid) {
    before = absl::StrCat("; the step finder's thread was ", plan.tid, " \"", plan.thread_comm, "\"");
    plan.worker_tids.erase(choice.tid);
  }
  plan.pid = choice.pid;
  plan.tid = choice.tid;
  plan.thread_comm = choice.comm;
  return absl::StrCat("thread ", choice.tid, " \"", choice.comm, "\": ", choice.why, before);
}

}  // namespace gpuos
