// The step locator's steps from repeating sequences: of the GPU work
// (source 4, with the folds of periodic_extra_work.h) and of the CPU activity
// (source 7); see step_finder.h.
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/cuda_api_class.h"
#include "analysis/periodic_extra_work.h"
#include "analysis/step_finder.h"

namespace gpuos {
namespace {

// Side threads of the GPU work (StepLocator::GpuTokens): each under this
// share of the process's calls, all of them under the second.
constexpr double kSideThreadShare = 0.05;
constexpr double kSideThreadsShare = 0.10;

}  // namespace

std::vector<SequenceToken> StepLocator::GpuTokens(uint32_t pid, size_t& named, size_t* side_threads,
                                                  size_t* side_calls) const {
  std::vector<GpuCall> calls;
  absl::flat_hash_map<uint32_t, size_t> by_thread;
  for (const GpuCall& c : gpu_calls_) {
    if (c.pid != pid) continue;
    calls.push_back(c);
    ++by_thread[c.tid];
  }
  absl::flat_hash_set<uint32_t> side;
  size_t side_total = 0;
  for (const auto& [tid, n] : by_thread) {
    if (static_cast<double>(n) < kSideThreadShare * static_cast<double>(calls.size())) {
      side.insert(tid);
      side_total += n;
    }
  }
  if (!side.empty() && static_cast<double>(side_total) < kSideThreadsShare * static_cast<double>(calls.size())) {
    calls.erase(std::remove_if(calls.begin(), calls.end(), [&](const GpuCall& c) { return side.contains(c.tid); }),
                calls.end());
  } else {
    side.clear();
    side_total = 0;
  }
  if (side_threads != nullptr) *side_threads = side.size();
  if (side_calls != nullptr) *side_calls = side_total;
  std::sort(calls.begin(), calls.end(), [](const GpuCall& a, const GpuCall& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.correlation_id < b.correlation_id;
  });
  std::vector<SequenceToken> tokens;
  tokens.reserve(calls.size());
  for (const GpuCall& c : calls) {
    uint32_t symbol = c.api_symbol;
    if (!c.graph && c.correlation_id != 0) {
      auto it = gpu_names_.find(ThreadKey(pid, c.correlation_id));
      if (it != gpu_names_.end()) {
        symbol = it->second;
        ++named;
      }
    }
    tokens.push_back(SequenceToken{symbol, c.start_ns, c.end_ns});
  }
  return tokens;
}

bool StepLocator::KernelSequenceSteps(StepPlan& plan, uint32_t pid, const std::string& why, std::string& why_not) {
  size_t named = 0, side_threads = 0, side_calls = 0;
  std::vector<SequenceToken> tokens = GpuTokens(pid, named, &side_threads, &side_calls);
  std::vector<bool> preferred(symbols_.size(), false);
  for (size_t i = 0; i < symbols_.size(); ++i) {
    const std::string& name = symbols_[i];
    preferred[i] = name.rfind("memcpy HTOD", 0) == 0 || NamesCopyToDevice(name);
  }
  PeriodOptions options;
  options.backward_starts = BackwardStartsOfProcess(pid);
  options.update_symbols.resize(symbols_.size());
  for (size_t i = 0; i < symbols_.size(); ++i) {
    options.update_symbols[i] = symbols_[i].find("multi_tensor") != std::string::npos;
  }
  PeriodResult period = FindRepeatingSequence(tokens, preferred, options);
  std::string what = absl::StrFormat(
      "the GPU work of process %d (its %d kernel launches, copies, memsets and synchronizations across its "
      "threads in call order, %d named by their GPU records%s",
      pid, tokens.size(), named, named == 0 ? ", the rest by the call and its arguments" : "");
  if (side_threads > 0) {
    absl::StrAppend(&what, absl::StrFormat("; not the %d calls of %d thread%s that each made under %.0f%% of them, "
                                           "which come at no fixed place in the loop (a thread that prefetches "
                                           "batches to the GPU)",
                                           side_calls, side_threads, side_threads == 1 ? "" : "s",
                                           100 * kSideThreadShare));
  }
  absl::StrAppend(&what, ")");
  if (!period.found) {
    why_not = absl::StrCat("no repeating unit in ", what, ": ", period.why_not);
    return false;
  }
  StepPlan without = plan;
  PeriodSteps(plan, StepSource::kRepeatingKernelSequence, period, what, why, symbols_);
  if (const PeriodicFold fold = FoldAroundTrainingSteps(plan.steps, options.backward_starts); fold.period != 0) {
    absl::StrAppend(&plan.note,
                    absl::StrFormat("; but that unit holds no backward pass, and the stretches it leaves out hold them, "
                                    "one in %d (%d times): the unit is an RL loop's environment step, repeated for "
                                    "a rollout before its updates, so a step here is %d of them with their "
                                    "updates, from the start of one update stretch to the next",
                                    fold.period, fold.occurrences, fold.period));
  } else if (const PeriodicFold extra = FoldExtraTrainingSteps(plan.steps, options.backward_starts);
             extra.period != 0) {
    absl::StrAppend(&plan.note,
                    absl::StrFormat("; one unit in %d (%d times) holds more backward passes than the others: another "
                                    "update made once every %d units (a GAN's generator update after %d critic "
                                    "updates), not an evaluation pass, so a step here is %d units, ending with the "
                                    "one that holds that update",
                                    extra.period, extra.occurrences, extra.period, extra.period, extra.period));
  } else if (UnitHoldsNoBackwardPass(plan.steps, options.backward_starts)) {
    // An environment step of a loop whose updates come after a varying
    // number of them (epsilon-greedy actions make no forward pass): the
    // backward passes mark the iterations instead.
    why_not = absl::StrCat("the repeating unit of ", what,
                           " holds no backward pass, and the backward passes come after no fixed number of "
                           "units: the unit is part of an iteration (an environment step)");
    plan = std::move(without);
    return false;
  }
  NoteLeftOut(plan);
  return true;
}

bool StepLocator::CpuActivitySteps(StepPlan& plan, const std::string& why, std::string& why_not) {
  // The launched command, or the first attach target, else the busiest.
  uint32_t pid = cpu_.BusiestProcess();
  for (uint32_t candidate : {first_target_, root_pid_}) {
    if (candidate != 0 && cpu_.TokenCount(candidate) > 0) pid = candidate;
  }
  if (pid == 0) {
    why_not = "no thread blocked or mapped memory (nothing repeats on the CPU side)";
    return false;
  }
  std::vector<std::string> names;
  std::vector<SequenceToken> tokens = cpu_.Tokens(pid, names);
  PeriodOptions options;
  options.tokens_are_waits = true;
  // A thread's waits vary more than a launch sequence (a wait that the
  // data happened to beat, an extra poll): a quarter of the unit.
  options.tolerance = 0.25;
  PeriodResult period = FindRepeatingSequence(tokens, {}, options);
  const std::string what = absl::StrFormat(
      "the CPU activity of process %d (the %d points where its main thread blocked, by cause and syscall, "
      "and its mmap/munmap calls by length; preemptions left out)",
      pid, tokens.size());
  if (!period.found) {
    why_not = absl::StrCat("no repeating unit in ", what, ": ", period.why_not);
    return false;
  }
  plan.pid = pid;
  plan.tid = pid;
  PeriodSteps(plan, StepSource::kRepeatingCpuActivity, period, what, why, names);
  NoteLeftOut(plan);
  return true;
}

void StepLocator::PeriodSteps(StepPlan& plan, StepSource source, const PeriodResult& period,
                              const std::string& what, const std::string& why,
                              const std::vector<std::string>& names) {
  auto name = [&](uint32_t symbol) {
    std::string n = symbol < names.size() ? names[symbol] : absl::StrCat("#", symbol);
    if (n.size() > 100) n = absl::StrCat(n.substr(0, 97), "...");
    return n;
  };
  plan.source = source;
  plan.steps.clear();
  for (size_t i = 0; i < period.iterations.size(); ++i) {
    const Iteration& it = period.iterations[i];
    StepWindow w;
    w.index = i;
    w.start_ns = it.start_ns;
    w.end_ns = it.end_ns;
    w.left_out = it.left_out;
    w.warmup = !it.left_out.empty();
    plan.steps.push_back(std::move(w));
  }
  plan.anchor_name = name(period.cut_symbol);
  plan.note = absl::StrFormat(
      "%s; steps are the repeating unit of %s: %d iterations of %d tokens each, found by splitting the sequence "
      "at each \"%s\" (%d anchors tried) and comparing the pieces; %d of %d iterations are steady (%.0f%% of "
      "the time from the first token to the last); a step starts before \"%s\" (%s)",
      why, what, period.iterations.size(), period.unit_tokens, name(period.anchor_symbol), period.anchors_tested,
      period.steady, period.iterations.size(), 100 * period.time_share, plan.anchor_name,
      period.cut_preferred ? "the iteration's host-to-device input copy"
      : source == StepSource::kRepeatingCpuActivity ? "the longest wait in the cycle (median)"
                                                     : "the position in the cycle with the longest median wait before it");
}

}  // namespace gpuos
