// The step locator's steps from marks: backward marks (the Python hook's
// autograd.backward ranges, gpuos-trace's uprobe on the autograd engine),
// grouped k at a time under gradient accumulation, the shim's live rhythm
// marks, and the steps from marks that hold extra work; see step_finder.h.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/accumulation_period.h"
#include "analysis/epoch_end_split.h"
#include "analysis/loader_restart.h"
#include "analysis/periodic_extra_work.h"
#include "analysis/step_extra_work.h"
#include "analysis/step_finder.h"
#include "analysis/thread_roles.h"
#include "common/count_in_range.h"
#include "common/interval_union.h"

namespace gpuos {

// Appends "left out of the summaries: step i: why; ..." for the steps
// marked left out, eight at most ("none" when none is).
void StepLocator::NoteLeftOut(StepPlan& plan) {
  std::vector<std::string> left;
  size_t left_out = 0;
  for (const StepWindow& w : plan.steps) {
    if (w.left_out.empty()) continue;
    if (++left_out <= 8) left.push_back(absl::StrCat("step ", w.index, ": ", w.left_out));
  }
  std::string out = left_out == 0 ? "none" : absl::StrJoin(left, "; ");
  if (left_out > left.size()) absl::StrAppend(&out, "; and ", left_out - left.size(), " more");
  absl::StrAppend(&plan.note, plan.note.empty() ? "" : "; ", "left out of the summaries: ", out);
  // Say it where what is left out is a large part of the run: it may be
  // part of every iteration rather than an interruption.
  uint64_t out_ns = 0, all_ns = 0;
  for (const StepWindow& w : plan.steps) {
    all_ns += w.end_ns - w.start_ns;
    if (!w.left_out.empty()) out_ns += w.end_ns - w.start_ns;
  }
  if (all_ns > 0 && 5 * out_ns >= all_ns) {
    absl::StrAppend(&plan.note,
                    absl::StrFormat(" (these steps hold %.0f%% of the run's time: if their extra work belongs to "
                                    "every iteration, as an RL loop's rollout does, a step here is only part of one)",
                                    100.0 * static_cast<double>(out_ns) / static_cast<double>(all_ns)));
  }
}

bool StepLocator::BackwardSteps(StepPlan& plan, const std::string& why, bool from_uprobe) {
  const std::vector<Range>* ranges = nullptr;
  uint64_t key = 0;
  size_t reentrant = 0;
  for (const auto& [k, r] : from_uprobe ? backward_uprobe_starts_ : backward_ranges_) {
    if (OnAutogradEngineThread(k)) {
      reentrant += r.size();
      continue;
    }
    if (ranges == nullptr || r.size() > ranges->size() || (r.size() == ranges->size() && k < key)) {
      ranges = &r;
      key = k;
    }
  }
  if (ranges == nullptr || ranges->size() < 2) return false;
  std::vector<uint64_t> ends;
  for (const Range& r : *ranges) ends.push_back(r.end_ns);
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  if (ends.size() < 2) return false;
  plan.pid = static_cast<uint32_t>(key >> 32);
  plan.tid = static_cast<uint32_t>(key);
  std::string marks =
      from_uprobe ? absl::StrFormat("gpuos-trace's uprobe on torch::autograd::Engine::execute, every "
                                    "loss.backward() of Python or C++: %d on thread %s",
                                    ranges->size(), ThreadText(plan.tid))
                  : absl::StrFormat("the Python start-up hook's marks of loss.backward(): %d on thread %s",
                                    ranges->size(), ThreadText(plan.tid));
  if (reentrant > 0) {
    absl::StrAppend(&marks, absl::StrFormat("; %d more on PyTorch's autograd engine threads are backward calls made "
                                            "inside a backward pass (reentrant activation checkpointing), not the "
                                            "loop's",
                                            reentrant));
  }
  const std::string bounds = from_uprobe ? "the start of" : "the end of";
  std::string grouping;
  if (const uint32_t k = GroupBackwardSteps(plan, ends, plan.tid, grouping); k > 0) {
    plan.note = absl::StrFormat(
        "%s; steps are groups of %d backward passes (%s): the CPU work of thread %s between them repeats every %d "
        "(%s), as when the optimizer's update comes after every %d backward passes (gradient accumulation), so "
        "a step is %d micro-batches and their update, from %s the first backward pass of a group to %s the next "
        "group's first",
        why, k, marks, ThreadText(plan.tid), k, grouping, k, k, bounds, bounds);
    return true;
  }
  plan.steps.clear();
  for (size_t i = 1; i < ends.size(); ++i) {
    StepWindow w;
    w.start_ns = ends[i - 1];
    w.end_ns = ends[i];
    w.index = i;
    plan.steps.push_back(w);
  }
  plan.source = from_uprobe ? StepSource::kBackwardUprobe : StepSource::kBackwardRanges;
  if (from_uprobe) {
    // Nothing here marks the optimizer step (a Python optimizer has no
    // C++ entry point to probe): only the period of the CPU work between
    // backward passes groups them.
    plan.note = absl::StrFormat(
        "%s; steps run from the start of one backward pass to the start of the next (%s); one backward pass is "
        "one step, so with gradient accumulation a step here is one micro-batch (%s)",
        why, marks, grouping);
    return true;
  }
  plan.note = absl::StrFormat(
      "%s; steps run from the end of one \"%s\" range to the end of the next (%s), as a loop that updates its "
      "parameters by hand makes one backward pass a step (with gradient accumulation by hand, a step here is one "
      "micro-batch: %s)",
      why, options_.backward_range_name, marks, grouping);
  return true;
}

uint32_t StepLocator::GroupBackwardSteps(StepPlan& plan, const std::vector<uint64_t>& bounds, uint32_t tid,
                                         std::string& detail) {
  if (!cpu_.HasTimeline(tid)) {
    detail = absl::StrCat("how long thread ", ThreadText(tid),
                           " ran between them is unknown (no off-CPU records), so they are not grouped");
    return 0;
  }
  std::vector<uint64_t> work;
  for (size_t j = 0; j + 1 < bounds.size(); ++j) work.push_back(cpu_.RunningNs(tid, bounds[j], bounds[j + 1]));
  // Where the training DataLoader forked its workers: an epoch's start.
  std::vector<bool> epoch_starts(work.size(), false);
  for (uint64_t fork : LoopForks(plan)) {
    auto next = std::upper_bound(bounds.begin(), bounds.end(), fork);
    if (next != bounds.begin() && next != bounds.end()) epoch_starts[next - bounds.begin() - 1] = true;
  }
  const AccumulationPeriod period = FindAccumulationPeriod(work, epoch_starts);
  if (!period.found) {
    detail = period.ambiguous
                  ? absl::StrCat("the CPU work between them repeats with two periods that do not divide each other, "
                                 "so how many make an optimizer step is ambiguous and they are not grouped: ",
                                 period.evidence)
                  : absl::StrCat("the CPU work between them shows no period of gradient accumulation: ",
                                 period.evidence);
    return 0;
  }
  // A group runs from the backward pass after one update to the backward
  // pass after the next (interval j follows backward pass j), and from the
  // first backward pass where the first update closes a whole group.
  std::vector<size_t> group_starts;
  const std::vector<size_t> updates = UpdateIntervals(work, period);
  if (!updates.empty() && updates.front() + 1 == period.k) group_starts.push_back(0);
  for (size_t j : updates) group_starts.push_back(j + 1);
  std::vector<StepWindow> steps;
  size_t without_update = 0;
  for (size_t g = 0; g + 1 < group_starts.size(); ++g) {
    StepWindow w;
    w.start_ns = bounds[group_starts[g]];
    w.end_ns = bounds[group_starts[g + 1]];
    w.index = steps.size();
    // Where the phase changes (an epoch's end inside a group), a group of
    // another size is still one optimizer step.
    if (const size_t passes = group_starts[g + 1] - group_starts[g];
        passes > period.k && period.phase_changes == 0) {
      w.warmup = true;
      w.left_out = absl::StrFormat("%d backward passes before one update where the others have %d: backward passes "
                                   "with no update of their own (an evaluation that adapts before it scores, as "
                                   "MAML's)",
                                   passes, period.k);
      ++without_update;
    }
    steps.push_back(w);
  }
  if (steps.empty()) {
    detail = absl::StrCat("a period of ", period.k, " backward passes, but no whole group (", period.evidence, ")");
    return 0;
  }
  plan.steps = std::move(steps);
  plan.source = StepSource::kBackwardGroups;
  detail = period.evidence;
  if (period.phase_changes > 0) {
    absl::StrAppend(&detail, absl::StrFormat("; the %d groups of another size are steps too (a loop that counts its "
                                             "micro-batches per epoch steps at an epoch's end, or carries them "
                                             "into the next epoch's first step)",
                                             period.phase_changes));
  }
  if (without_update > 0) {
    absl::StrAppend(&detail, absl::StrFormat("; the groups follow the updates (intervals %d apart that ran "
                                             "like one: mostly %.3f ms CPU time or more), and %d held more backward "
                                             "passes than %d",
                                             period.k, ClearUpdateThreshold(work, period) / 1e6, without_update,
                                             period.k));
  }
  return period.k;
}

bool StepLocator::OnAutogradEngineThread(uint64_t key) const {
  auto comm = comm_.find(static_cast<uint32_t>(key));
  return comm != comm_.end() && RoleFromComm(comm->second.second) == ThreadRole::kAutograd;
}

std::vector<uint64_t> StepLocator::BackwardStarts(uint64_t key) const {
  // The hook's marks where it ran: they are the loop's loss.backward()
  // calls, where the uprobe also counts torch.autograd.grad's, which an
  // evaluation that adapts to each task before it scores (MAML's) makes
  // with no optimizer step.
  std::vector<uint64_t> starts;
  auto hook = backward_ranges_.find(key);
  if (hook != backward_ranges_.end() && hook->second.size() >= 2) {
    for (const Range& r : hook->second) starts.push_back(r.start_ns);
  } else if (auto uprobe = backward_uprobe_starts_.find(key); uprobe != backward_uprobe_starts_.end()) {
    for (const Range& r : uprobe->second) starts.push_back(r.start_ns);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

std::vector<uint64_t> StepLocator::BackwardStartsOfProcess(uint32_t pid) const {
  std::vector<uint64_t> starts;
  for (const auto* by_thread : {&backward_uprobe_starts_, &backward_ranges_}) {
    for (const auto& [key, ranges] : *by_thread) {
      if (static_cast<uint32_t>(key >> 32) != pid || OnAutogradEngineThread(key)) continue;
      for (const Range& r : ranges) starts.push_back(r.start_ns);
    }
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

uint64_t StepLocator::RunningOutsideData(const StepPlan& plan, const std::vector<Range>& data, uint64_t from,
                                         uint64_t to) const {
  uint64_t ns = cpu_.RunningNs(plan.tid, from, to);
  auto r = std::lower_bound(data.begin(), data.end(), from, [](const Range& a, uint64_t t) { return a.end_ns <= t; });
  for (; r != data.end() && r->start_ns < to; ++r) {
    const uint64_t inside = cpu_.RunningNs(plan.tid, std::max(from, r->start_ns), std::min(to, r->end_ns));
    ns -= std::min(ns, inside);
  }
  return ns;
}

std::vector<std::pair<uint64_t, uint64_t>> StepLocator::Spans(const std::vector<Range>& ranges) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  out.reserve(ranges.size());
  for (const Range& r : ranges) out.emplace_back(r.start_ns, r.end_ns);
  return out;
}

std::vector<uint64_t> StepLocator::LoopForks(const StepPlan& plan, std::vector<uint64_t>* ended_before_backward) const {
  std::vector<uint64_t> forks;
  auto it = forks_.find(ThreadKey(plan.pid, plan.tid));
  if (it == forks_.end()) return forks;
  const std::vector<uint64_t> backward = BackwardStarts(ThreadKey(plan.pid, plan.tid));
  for (const Fork& f : it->second) {
    auto next_backward = std::upper_bound(backward.begin(), backward.end(), f.ts_ns);
    auto life = lifetimes_.find(f.child);
    const bool ended_before = next_backward != backward.end() && life != lifetimes_.end() &&
                              life->second.second != 0 && life->second.second < *next_backward;
    if (!ended_before) {
      forks.push_back(f.ts_ns);
    } else if (ended_before_backward != nullptr) {
      ended_before_backward->push_back(f.ts_ns);
    }
  }
  std::sort(forks.begin(), forks.end());
  if (ended_before_backward != nullptr) std::sort(ended_before_backward->begin(), ended_before_backward->end());
  return forks;
}

std::vector<StepCpuWork> StepLocator::CpuWork(const StepPlan& plan, const std::vector<uint64_t>& forks,
                                             const std::vector<uint64_t>& evaluation_forks) const {
  std::vector<StepCpuWork> out;
  if (!cpu_.HasTimeline(plan.tid)) return out;
  const std::vector<uint64_t> starts = BackwardStarts(ThreadKey(plan.pid, plan.tid));
  const std::vector<Range> data = DataRanges(plan);
  auto running = [&](uint64_t from, uint64_t to) { return RunningOutsideData(plan, data, from, to); };
  // Where the hook's loss.backward() marks cut the stretches (`starts`),
  // the uprobe's engine calls beyond them are torch.autograd.grad's.
  std::vector<uint64_t> engine_calls;
  if (auto hook = backward_ranges_.find(ThreadKey(plan.pid, plan.tid));
      hook != backward_ranges_.end() && hook->second.size() >= 2) {
    if (auto uprobe = backward_uprobe_starts_.find(hook->first); uprobe != backward_uprobe_starts_.end()) {
      for (const Range& r : uprobe->second) engine_calls.push_back(r.start_ns);
    }
    std::sort(engine_calls.begin(), engine_calls.end());
  }
  for (const StepWindow& w : plan.steps) {
    StepCpuWork work;
    auto fork = std::lower_bound(forks.begin(), forks.end(), w.start_ns);
    work.forked = fork != forks.end() && *fork < w.end_ns;
    work.fork_in_stretches = work.forked && data.empty();
    work.evaluation_loader = CountInRange(evaluation_forks, w.start_ns, w.end_ns) > 0;
    const size_t calls = CountInRange(engine_calls, w.start_ns, w.end_ns);
    const size_t loop = CountInRange(starts, w.start_ns, w.end_ns);
    work.other_engine_calls = calls > loop ? calls - loop : 0;
    work.page_faults = cpu_.PageFaults(plan.tid, w.start_ns, w.end_ns);
    uint64_t from = w.start_ns;
    auto it = std::upper_bound(starts.begin(), starts.end(), w.start_ns);
    for (; it != starts.end() && *it < w.end_ns; ++it) {
      work.stretches_ns.push_back(running(from, *it));
      from = *it;
    }
    work.stretches_ns.push_back(running(from, w.end_ns));
    out.push_back(std::move(work));
  }
  return out;
}

void StepLocator::SplitEpochEnds(StepPlan& plan, const std::vector<uint64_t>& fork_times) {
  if (!cpu_.HasTimeline(plan.tid)) return;
  if (fork_times.empty()) return;
  const std::vector<Range> data = DataRanges(plan);
  const auto cpu_ns = [&](uint64_t from, uint64_t to) { return RunningOutsideData(plan, data, from, to); };
  const std::vector<uint64_t> backward = BackwardStarts(ThreadKey(plan.pid, plan.tid));
  const size_t split = SplitAtEpochStarts(plan.steps, fork_times, Spans(data), backward, cpu_ns);
  if (split > 0) {
    absl::StrAppend(&plan.note, plan.note.empty() ? "" : "; ",
                    absl::StrFormat("%d steps held the end of an epoch (the loop's work after its last update and "
                                    "before the next epoch's DataLoader started its workers): each was cut where "
                                    "the workers started, the end left out and the iteration measured",
                                    split));
  }
  if (plan.source != StepSource::kBackwardGroups) return;
  if (const size_t ended = EndEpochsInGroups(plan.steps, fork_times, Spans(data), backward, cpu_ns); ended > 0) {
    absl::StrAppend(&plan.note, plan.note.empty() ? "" : "; ",
                    absl::StrFormat("%d groups held the end of an epoch after their last backward pass (an "
                                    "evaluation pass, a checkpoint?): each was left out and ended where the next "
                                    "epoch's DataLoader started its workers, where the next step begins",
                                    ended));
  }
}

void StepLocator::MarkExtraWork(StepPlan& plan) {
  // An evaluation pass or checkpoint between two marks falls into a step.
  std::vector<uint64_t> evaluation_forks;
  const std::vector<uint64_t> forks = LoopForks(plan, &evaluation_forks);
  SplitEpochEnds(plan, forks);
  size_t named = 0;
  const std::vector<SequenceToken> tokens = GpuTokens(plan.pid, named);
  std::vector<size_t> marked_steps;
  const std::vector<StepCpuWork> cpu_work =
      tokens.empty() ? CpuWork(plan, forks, evaluation_forks) : std::vector<StepCpuWork>();
  const size_t marked = tokens.empty() ? MarkExtraCpuWorkSteps(plan.steps, cpu_work, &marked_steps)
                                       : MarkExtraWorkSteps(plan.steps, tokens, &marked_steps);
  if (marked == 0) {
    // Steps the source itself left out (backward groups without an update)
    // are listed all the same.
    if (std::any_of(plan.steps.begin(), plan.steps.end(), [](const StepWindow& w) { return !w.left_out.empty(); })) {
      NoteLeftOut(plan);
    }
    return;
  }
  // Only the Python hook's marks come with its data fetches, which tell an
  // evaluation pass (it reads data) from a rollout (it makes its own).
  const bool fetches_seen = plan.source == StepSource::kOptimizerSteps || plan.source == StepSource::kBackwardRanges;
  const PeriodicFold fold =
      fetches_seen ? FoldPeriodicExtraWork(plan.steps, FetchesInSteps(plan)) : PeriodicFold{};
  if (fold.period == 0) {
    if (plan.source == StepSource::kOptimizerSteps) {
      SplitOffIterations(plan, tokens, marked_steps, cpu_work);
    } else {
      MoveRestarts(plan, marked_steps);
    }
    NoteLeftOut(plan);
    return;
  }
  absl::StrAppend(
      &plan.note, plan.note.empty() ? "" : "; ",
      absl::StrFormat("one interval in %d between these marks held extra work with no backward pass (%d times, "
                      "%.0f%% of the run's time from the first): work that large at a fixed period is part of "
                      "each iteration (an RL rollout before k minibatch updates), so a step here is %d of those "
                      "intervals, from the start of one such stretch to the next",
                      fold.period, fold.occurrences, 100 * fold.share, fold.period));
}

void StepLocator::SplitOffIterations(StepPlan& plan, const std::vector<SequenceToken>& tokens,
                                     const std::vector<size_t>& marked, const std::vector<StepCpuWork>& cpu_work) {
  const std::vector<Range> data = DataRanges(plan);
  const std::vector<uint64_t> backward = BackwardStarts(ThreadKey(plan.pid, plan.tid));
  size_t split = 0;
  if (!tokens.empty()) {
    std::vector<uint64_t> fetches;
    for (const Range& r : data) fetches.push_back(r.start_ns);
    split = SplitExtraWorkSteps(plan.steps, tokens, marked, fetches, backward);
  } else {
    split = SplitExtraCpuWorkSteps(plan.steps, marked, cpu_work, Spans(data), backward, [&](uint64_t from, uint64_t to) {
      return RunningOutsideData(plan, data, from, to);
    });
  }
  if (split == 0) return;
  absl::StrAppend(&plan.note, plan.note.empty() ? "" : "; ",
                  absl::StrFormat("%d of the steps with extra work ended with a whole iteration (its data fetch, "
                                  "its backward passes, its update): each was cut where %s, the extra before it "
                                  "left out and the iteration measured",
                                  split,
                                  tokens.empty() ? "the iteration's data loading began"
                                                 : "the extra work's last GPU operation ended"));
}

void StepLocator::MoveRestarts(StepPlan& plan, const std::vector<size_t>& marked) const {
  auto it = loop_waits_.find(plan.tid);
  if (it == loop_waits_.end()) return;
  std::vector<LoopWait> waits = it->second;
  std::sort(waits.begin(), waits.end(), [](const LoopWait& a, const LoopWait& b) { return a.start_ns < b.start_ns; });
  uint64_t wait_ns = 0;
  const size_t moved = MoveLoaderRestarts(plan.steps, marked, BackwardStarts(ThreadKey(plan.pid, plan.tid)), waits,
                                          plan.worker_pids, &wait_ns);
  if (moved == 0) return;
  absl::StrAppend(&plan.note, plan.note.empty() ? "" : "; ",
                  absl::StrFormat("%d of the steps with extra work ended with a new epoch's DataLoader restart "
                                  "(persistent workers resumed: %.3f ms of waits for them in all): each restart, "
                                  "from the first of those waits, is measured with the next step, as the job's own "
                                  "per-iteration timing counts it in the epoch's first iteration",
                                  moved, static_cast<double>(wait_ns) / 1e6));
}

std::vector<StepLocator::Range> StepLocator::DataRanges(const StepPlan& plan) const {
  std::vector<Range> ranges;
  if (auto it = data_ranges_.find(ThreadKey(plan.pid, plan.tid)); it != data_ranges_.end()) ranges = it->second;
  // One range where several overlap (a script's own "data loading" range
  // around the hook's fetch).
  UniteOverlapping(ranges);
  return ranges;
}

std::vector<bool> StepLocator::FetchesInSteps(const StepPlan& plan) const {
  std::vector<bool> out(plan.steps.size(), false);
  std::vector<uint64_t> starts;
  for (const Range& r : DataRanges(plan)) starts.push_back(r.start_ns);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    auto first = std::lower_bound(starts.begin(), starts.end(), plan.steps[i].start_ns);
    out[i] = first != starts.end() && *first < plan.steps[i].end_ns;
  }
  return out;
}

bool StepLocator::LiveRhythmSteps(StepPlan& plan, const std::string& why) {
  const std::vector<uint64_t>* marks = nullptr;
  uint64_t key = 0;
  for (const auto& [k, times] : live_rhythm_marks_) {
    if (marks == nullptr || times.size() > marks->size() || (times.size() == marks->size() && k < key)) {
      marks = &times;
      key = k;
    }
  }
  if (marks == nullptr) return false;
  std::vector<uint64_t> ends = *marks;
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  plan.steps.clear();
  for (size_t i = 1; i < ends.size(); ++i) {
    StepWindow w;
    w.index = i - 1;
    w.start_ns = ends[i - 1];
    w.end_ns = ends[i];
    plan.steps.push_back(w);
  }
  if (plan.steps.empty()) return false;
  plan.source = StepSource::kApiRhythm;
  plan.live_rhythm = true;
  plan.pid = static_cast<uint32_t>(key >> 32);
  plan.tid = static_cast<uint32_t>(key);
  plan.anchor_name = live_rhythm_call_;
  plan.note = absl::StrFormat(
      "%s; steps run from the return of one %s call to the next on thread %s, counted live in the job by the shim "
      "(every capture window opens and closes on these steps): %d marks",
      why, live_rhythm_call_, ThreadText(plan.tid), ends.size());
  return true;
}

}  // namespace gpuos
