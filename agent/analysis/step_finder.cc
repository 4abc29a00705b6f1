// Finding the launching thread, its steps and the data workers; see
// step_finder.h.
#include "analysis/step_finder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpuos {
namespace {

uint64_t ThreadKey(uint32_t pid, uint32_t tid) { return (static_cast<uint64_t>(pid) << 32) | tid; }

}  // namespace

const char* StepSourceName(StepSource source) {
  switch (source) {
    case StepSource::kNvtxRanges: return "nvtx_step_ranges";
    case StepSource::kOptimizerSteps: return "optimizer_step_ranges";
    case StepSource::kNone: break;
  }
  return "none";
}

absl::StatusOr<std::unique_ptr<StepLocator>> StepLocator::Create(const StepOptions& options) {
  auto step = StepNameMatcher::Create(options.step_regex, "--step-regex");
  if (!step.ok()) return step.status();
  auto worker = StepNameMatcher::Create(options.worker_comm_regex, "worker comm regex");
  if (!worker.ok()) return worker.status();
  // The collector compiles this one; fail here, before a pass is wasted.
  auto data = StepNameMatcher::Create(options.data_range_regex, "--data-range-regex");
  if (!data.ok()) return data.status();
  return std::unique_ptr<StepLocator>(new StepLocator(options, std::move(*step), std::move(*worker)));
}

void StepLocator::SeeComm(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  auto [it, inserted] = comm_.try_emplace(tid, ts, comm);
  if (!inserted && ts >= it->second.first) it->second = {ts, comm};
  if (worker_.Matches(comm)) {
    named_worker_tids_[tid] = pid;
    if (tid == pid) named_worker_pids_.insert(pid);
  }
}

void StepLocator::Add(const v1::Event& e) {
  switch (e.payload_case()) {
    case v1::Event::kNvtxRange: {
      const v1::NvtxRange& r = e.nvtx_range();
      if (r.duration_ns() == 0) break;  // never ended, or a zero-length marker
      Range range{e.ts_ns(), e.ts_ns() + r.duration_ns(), -1};
      if (step_.Matches(r.name())) {
        range.number = TrailingNumber(r.name());
        step_ranges_[ThreadKey(e.pid(), e.tid())].push_back(range);
      } else if (r.name() == options_.optimizer_range_name) {
        optimizer_ranges_[ThreadKey(e.pid(), e.tid())].push_back(range);
      }
      break;
    }
    case v1::Event::kProcessStart:
      parent_[e.pid()] = e.process_start().ppid();
      SeeComm(e.ts_ns(), e.pid(), e.tid(), e.process_start().comm());
      break;
    case v1::Event::kThreadStart:
      SeeComm(e.ts_ns(), e.pid(), e.tid(), e.thread_start().comm());
      break;
    case v1::Event::kExec:
      SeeComm(e.ts_ns(), e.pid(), e.tid(), e.exec().comm());
      break;
    case v1::Event::kCommChange:
      SeeComm(e.ts_ns(), e.pid(), e.tid(), e.comm_change().new_comm());
      break;
    case v1::Event::kThreadExit:
      SeeComm(e.ts_ns(), e.pid(), e.tid(), e.thread_exit().comm());
      break;
    case v1::Event::kProcessExit:
      SeeComm(e.ts_ns(), e.pid(), e.tid(), e.process_exit().comm());
      break;
    default:
      break;
  }
}

StepPlan StepLocator::Finish() {
  StepPlan plan;
  // The thread with the most ranges; ties go to the one that starts first.
  auto pick = [](absl::flat_hash_map<uint64_t, std::vector<Range>>& by_thread) -> std::pair<uint64_t, std::vector<Range>*> {
    std::pair<uint64_t, std::vector<Range>*> best{0, nullptr};
    uint64_t best_first = 0;
    for (auto& [key, ranges] : by_thread) {
      uint64_t first = UINT64_MAX;
      for (const Range& r : ranges) first = std::min(first, r.start_ns);
      if (best.second == nullptr || ranges.size() > best.second->size() ||
          (ranges.size() == best.second->size() && (first < best_first || (first == best_first && key < best.first)))) {
        best = {key, &ranges};
        best_first = first;
      }
    }
    return best;
  };

  auto by_start = [](const Range& a, const Range& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  };
  if (!step_ranges_.empty()) {
    auto [key, ranges] = pick(step_ranges_);
    plan.source = StepSource::kNvtxRanges;
    plan.pid = static_cast<uint32_t>(key >> 32);
    plan.tid = static_cast<uint32_t>(key);
    plan.other_threads_with_steps = static_cast<uint32_t>(step_ranges_.size() - 1);
    std::sort(ranges->begin(), ranges->end(), by_start);
    // A step range inside another (a user's "step 3" inside the profiler's
    // "ProfilerStep#3") would count the same time twice: keep the outer one.
    uint64_t outer_end = 0;
    for (const Range& r : *ranges) {
      if (!plan.steps.empty() && r.end_ns <= outer_end) continue;
      StepWindow w;
      w.start_ns = r.start_ns;
      w.end_ns = r.end_ns;
      w.index = r.number >= 0 ? static_cast<uint64_t>(r.number) : plan.steps.size();
      plan.steps.push_back(w);
      outer_end = r.end_ns;
    }
  } else if (!optimizer_ranges_.empty()) {
    auto [key, ranges] = pick(optimizer_ranges_);
    plan.source = StepSource::kOptimizerSteps;
    plan.pid = static_cast<uint32_t>(key >> 32);
    plan.tid = static_cast<uint32_t>(key);
    std::sort(ranges->begin(), ranges->end(), by_start);
    // Step i runs from the end of optimizer step i-1 to the end of
    // optimizer step i: fetch, forward, backward and update of one batch.
    for (size_t i = 1; i < ranges->size(); ++i) {
      StepWindow w;
      w.start_ns = (*ranges)[i - 1].end_ns;
      w.end_ns = (*ranges)[i].end_ns;
      if (w.end_ns <= w.start_ns) continue;
      w.index = i;
      plan.steps.push_back(w);
    }
    if (plan.steps.empty()) {
      plan.source = StepSource::kNone;
      plan.note = absl::StrCat("only one \"", options_.optimizer_range_name,
                               "\" range: steps are the intervals between two of them");
    }
  } else {
    plan.note = absl::StrCat("no NVTX range is named like a training step (--step-regex \"", options_.step_regex,
                             "\") and there are no \"", options_.optimizer_range_name,
                             "\" ranges: annotate each step with an NVTX range, e.g. "
                             "nvtx.annotate(f\"step {i}\") around the loop body");
  }
  for (size_t i = 0; i < plan.steps.size() && i < options_.warmup_steps; ++i) plan.steps[i].warmup = true;
  if (plan.source == StepSource::kNone) return plan;

  auto comm = comm_.find(plan.tid);
  if (comm != comm_.end()) plan.thread_comm = comm->second.second;

  // Descendants of the launching process: DataLoader workers are its children.
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> children;
  for (const auto& [pid, ppid] : parent_) {
    if (pid != ppid) children[ppid].push_back(pid);
  }
  std::vector<uint32_t> todo = {plan.pid};
  absl::flat_hash_set<uint32_t> seen = {plan.pid};
  while (!todo.empty()) {
    uint32_t pid = todo.back();
    todo.pop_back();
    auto it = children.find(pid);
    if (it == children.end()) continue;
    for (uint32_t child : it->second) {
      if (!seen.insert(child).second) continue;
      plan.worker_pids.insert(child);
      todo.push_back(child);
    }
  }
  for (uint32_t pid : named_worker_pids_) {
    if (pid != plan.pid) plan.worker_pids.insert(pid);
  }
  absl::flat_hash_set<uint32_t> worker_processes(plan.worker_pids.begin(), plan.worker_pids.end());
  for (const auto& [tid, pid] : named_worker_tids_) {
    if (tid == plan.tid) continue;
    plan.worker_tids.insert(tid);
    if (pid != plan.pid) worker_processes.insert(pid);
  }
  plan.worker_processes = static_cast<uint32_t>(worker_processes.size());
  return plan;
}

}  // namespace gpuos
