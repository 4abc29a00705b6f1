// Mark-based steps holding extra GPU work; see step_extra_work.h.
#include "analysis/step_extra_work.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/step_split.h"
#include "common/count_in_range.h"
#include "common/median.h"

namespace gpuos {
namespace {

constexpr size_t kMinSteps = 5;
constexpr double kMaxWorkRatio = 1.5;
constexpr size_t kMinForeignTokens = 16;
constexpr double kForeignShare = 0.05;
constexpr double kMaxExtraShare = 0.25;
constexpr double kGpuExtraGap = 2.0;
constexpr double kMinCpuExtraOfStep = 0.75;
constexpr double kCpuExtraGap = 2.0;
constexpr double kMinCpuExtraOfRun = 0.02;
constexpr size_t kNeighbours = 8;
constexpr size_t kMinNeighbours = 3;

uint64_t Sum(const std::vector<uint64_t>& v) { return std::accumulate(v.begin(), v.end(), uint64_t{0}); }

// The steady work around one step: medians over its neighbours.
struct LocalSteady {
  uint64_t total_ns = 0;
  std::vector<uint64_t> position_ns;  // per stretch position of the steady count
};

// The most common number of stretches (ties: the smaller).
size_t SteadyStretches(const std::vector<StepCpuWork>& work) {
  std::vector<size_t> sorted;
  for (const StepCpuWork& w : work) sorted.push_back(w.stretches_ns.size());
  std::sort(sorted.begin(), sorted.end());
  size_t steady = sorted[0], run = 0, best_run = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    run = i > 0 && sorted[i] == sorted[i - 1] ? run + 1 : 1;
    if (run > best_run) {
      best_run = run;
      steady = sorted[i];
    }
  }
  return steady;
}

// The steady work of the steps `refs`.
LocalSteady SteadyOf(const std::vector<size_t>& refs, const std::vector<StepCpuWork>& work,
                     const std::vector<uint64_t>& totals, size_t steady) {
  LocalSteady out;
  std::vector<uint64_t> at;
  for (size_t j : refs) at.push_back(totals[j]);
  out.total_ns = Median(at);
  out.position_ns.assign(steady, 0);
  for (size_t q = 0; q < steady; ++q) {
    at.clear();
    for (size_t j : refs) {
      if (work[j].stretches_ns.size() == steady) at.push_back(work[j].stretches_ns[q]);
    }
    out.position_ns[q] = at.empty() ? 0 : Median(at);
  }
  return out;
}

// A step's CPU work beyond a steady step's, and that steady step's CPU time
// at the step's own speed.
struct CpuExtra {
  uint64_t ns = 0;
  uint64_t steady_total_ns = 0;
  double share() const { return steady_total_ns ? static_cast<double>(ns) / static_cast<double>(steady_total_ns) : 0; }
};

// A step's extra over `ref` (see the header).  With several stretches, each
// one is compared with the reference scaled to the step's own speed, as its
// other stretches show it (a machine slower for a while slows every stretch;
// an evaluation pass lengthens one).
CpuExtra ExtraOver(const StepCpuWork& w, uint64_t total, const LocalSteady& ref, size_t steady) {
  if (w.stretches_ns.size() > steady) return {0, ref.total_ns};  // more backward passes: not forward-only work
  if (w.stretches_ns.size() < steady || steady == 1) {
    return {total > ref.total_ns ? total - ref.total_ns : 0, ref.total_ns};
  }
  uint64_t ref_sum = 0;
  for (uint64_t ns : ref.position_ns) ref_sum += ns;
  CpuExtra best{0, ref_sum};
  for (size_t q = 0; q < steady; ++q) {
    const uint64_t others_ref = ref_sum - ref.position_ns[q];
    if (others_ref == 0) continue;
    const double speed = static_cast<double>(total - w.stretches_ns[q]) / static_cast<double>(others_ref);
    const double expected = speed * static_cast<double>(ref.position_ns[q]);
    if (static_cast<double>(w.stretches_ns[q]) <= expected) continue;
    const CpuExtra e{static_cast<uint64_t>(static_cast<double>(w.stretches_ns[q]) - expected),
                     static_cast<uint64_t>(speed * static_cast<double>(ref_sum))};
    if (e.share() > best.share()) best = e;
  }
  return best;
}

// Each step's extra work against the steady step on either side of it: the
// medians over the up to kNeighbours steps before it, and over those after
// it, that are not left out already.  The side that counts is the one whose
// steady step is closest to the step's work outside its extra (the step's
// own speed): so a machine whose speed drifts over the run, or changes at
// once, moves the reference with it.  A side with fewer than
// kMinNeighbours such steps is not used (both: all the other steps are
// one side).
std::vector<CpuExtra> CpuExtras(const std::vector<StepWindow>& steps, const std::vector<StepCpuWork>& work,
                                const std::vector<uint64_t>& totals, size_t steady) {
  const size_t n = work.size();
  auto usable = [&](size_t j) { return !steps[j].warmup && steps[j].left_out.empty(); };
  std::vector<CpuExtra> out(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<size_t> before, after;
    for (size_t j = i; j > 0 && before.size() < kNeighbours; --j) {
      if (usable(j - 1)) before.push_back(j - 1);
    }
    for (size_t j = i + 1; j < n && after.size() < kNeighbours; ++j) {
      if (usable(j)) after.push_back(j);
    }
    std::vector<std::vector<size_t>> sides;
    if (before.size() >= kMinNeighbours) sides.push_back(before);
    if (after.size() >= kMinNeighbours) sides.push_back(after);
    if (sides.empty()) {
      sides.emplace_back();
      for (size_t j = 0; j < n; ++j) {
        if (j != i) sides.back().push_back(j);
      }
    }
    uint64_t best_mismatch = UINT64_MAX;
    for (const std::vector<size_t>& refs : sides) {
      const LocalSteady ref = SteadyOf(refs, work, totals, steady);
      const CpuExtra e = ExtraOver(work[i], totals[i], ref, steady);
      const uint64_t rest = totals[i] - std::min(totals[i], e.ns);
      const uint64_t mismatch = rest > ref.total_ns ? rest - ref.total_ns : ref.total_ns - rest;
      if (mismatch < best_mismatch) {
        best_mismatch = mismatch;
        out[i] = e;
      }
    }
  }
  return out;
}

constexpr size_t kNone = SIZE_MAX;

// The GPU work by step: which step each token falls in (kNone: between
// steps or outside), each step's token count, and which tokens are of a
// kind that fewer than half of the steps hold.
struct StepTokens {
  std::vector<size_t> step_of;
  std::vector<size_t> count;
  std::vector<bool> rare;
  size_t median = 0;
};

StepTokens TokensByStep(const std::vector<StepWindow>& steps, const std::vector<SequenceToken>& tokens) {
  const size_t n = steps.size();
  StepTokens out;
  out.step_of.assign(tokens.size(), kNone);
  out.count.assign(n, 0);
  size_t s = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint64_t ts = tokens[i].start_ns;
    while (s < n && steps[s].end_ns <= ts) ++s;
    if (s == n) break;
    if (ts < steps[s].start_ns) continue;
    out.step_of[i] = s;
    ++out.count[s];
  }
  out.median = n == 0 ? 0 : Median(out.count);
  size_t symbols = 0;
  for (const SequenceToken& t : tokens) symbols = std::max<size_t>(symbols, t.symbol + 1);
  std::vector<uint32_t> steps_with(symbols, 0);
  std::vector<size_t> last_step(symbols, kNone);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (out.step_of[i] == kNone || last_step[tokens[i].symbol] == out.step_of[i]) continue;
    last_step[tokens[i].symbol] = out.step_of[i];
    ++steps_with[tokens[i].symbol];
  }
  out.rare.assign(tokens.size(), false);
  for (size_t i = 0; i < tokens.size(); ++i) {
    out.rare[i] = out.step_of[i] != kNone && 2 * steps_with[tokens[i].symbol] < n;
  }
  return out;
}

// Where a marked step's iteration begins, given the step and its first
// backward start: `at` 0 where it does not; `work`, the part from there on
// as a share of the median step's work.
struct IterationCut {
  uint64_t at = 0;
  double work = 0;
  bool longer_is_iteration = false;  // work over the bounds is still one iteration's
};


// The bounds on an iteration's work, as a share of the median step's: 2/3
// to 3/2, wider where the steps themselves spread wider (a multi-scale
// detector's batch sizes, sentence lengths): their 10th and 90th
// percentiles.  Refusing the longer iterations there would leave the
// longer ones out and measure the rest short.
struct WorkBounds {
  double least = 2.0 / 3;
  double most = 1.5;
};
WorkBounds IterationWorkBounds(std::vector<uint64_t> steady_work) {
  WorkBounds bounds;
  if (steady_work.size() < kMinSteps) return bounds;
  std::sort(steady_work.begin(), steady_work.end());
  const double median = static_cast<double>(steady_work[steady_work.size() / 2]);
  if (median == 0) return bounds;
  const double p10 = static_cast<double>(steady_work[steady_work.size() / 10]);
  const double p90 = static_cast<double>(steady_work[steady_work.size() * 9 / 10]);
  bounds.least = std::min(bounds.least, p10 / median);
  bounds.most = std::max(bounds.most, p90 / median);
  return bounds;
}

// The `marked` steps with a backward start inside, split where `cut_of`
// says when the part from there on is a whole iteration: the median step's
// backward starts (at least one), and its share of the median step's work
// within `bounds`.  Returns how many were split.
size_t SplitMarked(std::vector<StepWindow>& steps, const std::vector<size_t>& marked,
                   const std::vector<uint64_t>& backward_starts,
                   const std::function<IterationCut(const StepWindow&, uint64_t)>& cut_of, const WorkBounds& bounds,
                   const char* suffix) {
  std::vector<size_t> backward(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) {
    backward[k] = CountInRange(backward_starts, steps[k].start_ns, steps[k].end_ns);
  }
  const size_t median_backward = Median(backward);
  if (median_backward == 0) return 0;
  std::vector<uint64_t> cut_at(steps.size(), 0);
  size_t split = 0;
  for (size_t k : marked) {
    const StepWindow& w = steps[k];
    auto first_backward = std::lower_bound(backward_starts.begin(), backward_starts.end(), w.start_ns);
    if (first_backward == backward_starts.end() || *first_backward >= w.end_ns) continue;
    const IterationCut cut = cut_of(w, *first_backward);
    if (cut.at == 0 || CountInRange(backward_starts, cut.at, w.end_ns) != median_backward ||
        cut.work < bounds.least || (cut.work > bounds.most && !cut.longer_is_iteration)) {
      continue;
    }
    cut_at[k] = cut.at;
    ++split;
  }
  if (split > 0) SplitStepsAt(steps, cut_at, suffix);
  return split;
}

// Marks left out, with `reason(k)`, each step `is_extra(k)`, unless more than
// kMaxExtraShare of the steps are (the work varies: none is told apart).
size_t MarkStepsApart(std::vector<StepWindow>& steps, const std::function<bool(size_t)>& is_extra,
                      const std::function<std::string(size_t)>& reason, std::vector<size_t>* marked_steps) {
  const size_t n = steps.size();
  size_t candidates = 0, marked = 0;
  for (size_t k = 0; k < n; ++k) candidates += is_extra(k);
  if (candidates > n * kMaxExtraShare) return 0;
  for (size_t k = 0; k < n; ++k) {
    StepWindow& w = steps[k];
    if (w.warmup || !w.left_out.empty() || !is_extra(k)) continue;
    w.warmup = true;
    w.left_out = reason(k);
    ++marked;
    if (marked_steps != nullptr) marked_steps->push_back(k);
  }
  return marked;
}

// The least score of the steps that stand apart: the largest c such that
// the c-th highest score of the steps not left out is at least 1 and at
// least kGpuExtraGap times the next (a continuum, as varying sequence
// lengths make, holds no such c).  0 where none does.
double LeastScoreApart(const std::vector<StepWindow>& steps, const std::vector<double>& score) {
  std::vector<double> sorted;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (!steps[k].warmup && steps[k].left_out.empty()) sorted.push_back(score[k]);
  }
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  sorted.push_back(0);
  const size_t most = static_cast<size_t>(static_cast<double>(steps.size()) * kMaxExtraShare);
  for (size_t c = std::min(most, sorted.size() - 1); c >= 1; --c) {
    if (sorted[c - 1] >= 1 && sorted[c - 1] >= kGpuExtraGap * sorted[c]) return sorted[c - 1];
  }
  return 0;
}

}  // namespace

size_t MarkExtraWorkSteps(std::vector<StepWindow>& steps, const std::vector<SequenceToken>& tokens,
                          std::vector<size_t>* marked_steps) {
  const size_t n = steps.size();
  if (n < kMinSteps || tokens.empty()) return 0;
  const StepTokens by_step = TokensByStep(steps, tokens);
  const std::vector<size_t>& count = by_step.count;
  const size_t median = by_step.median;
  if (median == 0) return 0;
  // Symbols seen in at least half of the steps are the steady step's.
  std::vector<size_t> foreign(n, 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (by_step.rare[i]) ++foreign[by_step.step_of[i]];
  }
  const size_t foreign_limit =
      std::max<size_t>(kMinForeignTokens, static_cast<size_t>(kForeignShare * static_cast<double>(median)));
  // Each step's extra as a share of the least that counts (1: at the limit).
  std::vector<double> score(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const double more = count[k] > median ? static_cast<double>(count[k] - median) / static_cast<double>(median) : 0;
    const double rare = static_cast<double>(foreign[k]) / static_cast<double>(foreign_limit);
    score[k] = std::max(more / (kMaxWorkRatio - 1), rare);
  }
  const double least = LeastScoreApart(steps, score);
  if (least == 0) return 0;
  // An evaluation pass or checkpoint is occasional; many such steps are dynamic shapes.
  const auto extra = [&](size_t k) { return score[k] >= least; };
  return MarkStepsApart(
      steps, extra,
      [&](size_t k) {
        return absl::StrFormat(
            "extra work: %d GPU operations, the median step has %d, %d of them of kinds most steps lack (an "
            "evaluation pass or checkpoint?)",
            count[k], median, foreign[k]);
      },
      marked_steps);
}

size_t SplitExtraWorkSteps(std::vector<StepWindow>& steps, const std::vector<SequenceToken>& tokens,
                           const std::vector<size_t>& marked, const std::vector<uint64_t>& fetch_starts,
                           const std::vector<uint64_t>& backward_starts) {
  if (marked.empty() || fetch_starts.empty() || backward_starts.empty()) return 0;
  const StepTokens by_step = TokensByStep(steps, tokens);
  if (by_step.median == 0) return 0;
  // How many tokens start before `t` (a step's tokens are a run: tokens and
  // steps are both in time order).
  const auto starts_before = [&tokens](uint64_t t) {
    return static_cast<size_t>(
        std::lower_bound(tokens.begin(), tokens.end(), t,
                         [](const SequenceToken& a, uint64_t v) { return a.start_ns < v; }) -
        tokens.begin());
  };
  const auto cut_of = [&](const StepWindow& w, uint64_t first_backward) {
    const size_t begin = starts_before(w.start_ns), end = starts_before(w.end_ns);
    uint64_t extra_end = 0;
    for (size_t i = begin; i < end && tokens[i].start_ns < first_backward; ++i) {
      if (by_step.rare[i]) extra_end = std::max(extra_end, tokens[i].end_ns);
    }
    auto fetch = std::lower_bound(fetch_starts.begin(), fetch_starts.end(), extra_end);
    if (extra_end == 0 || fetch == fetch_starts.end() || *fetch >= first_backward) return IterationCut{};
    const size_t after = end - starts_before(extra_end);
    return IterationCut{extra_end, static_cast<double>(after) / static_cast<double>(by_step.median)};
  };
  return SplitMarked(steps, marked, backward_starts, cut_of, WorkBounds(),
                     "; the iteration after it, from the end of that work, is measured on its own");
}

size_t SplitExtraCpuWorkSteps(std::vector<StepWindow>& steps, const std::vector<size_t>& marked,
                              const std::vector<StepCpuWork>& work,
                              const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges,
                              const std::vector<uint64_t>& backward_starts,
                              const std::function<uint64_t(uint64_t, uint64_t)>& cpu_ns) {
  if (marked.empty() || data_ranges.empty() || backward_starts.empty() || work.size() != steps.size()) return 0;
  std::vector<uint64_t> steady_cpu;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (!steps[k].warmup && steps[k].left_out.empty()) steady_cpu.push_back(Sum(work[k].stretches_ns));
  }
  const double steady = steady_cpu.empty() ? 0 : static_cast<double>(Median(steady_cpu));
  if (steady == 0) return 0;
  const WorkBounds bounds = IterationWorkBounds(steady_cpu);
  const auto cut_of = [&](const StepWindow& w, uint64_t first_backward) {
    // The last data range starting in (step start, first backward), then
    // back over the ranges chained right before it.
    auto r = std::lower_bound(data_ranges.begin(), data_ranges.end(), first_backward,
                              [](const std::pair<uint64_t, uint64_t>& a, uint64_t t) { return a.first < t; });
    if (r == data_ranges.begin() || std::prev(r)->first <= w.start_ns) return IterationCut{};
    --r;
    while (r != data_ranges.begin() && std::prev(r)->first > w.start_ns &&
           std::prev(r)->second + kDataRangeChainNs >= r->first) {
      --r;
    }
    const double before = static_cast<double>(cpu_ns(w.start_ns, r->first));
    const double after = static_cast<double>(cpu_ns(r->first, w.end_ns));
    // An iteration over the bounds is still one where the part left out
    // holds more than its excess over a steady step: the first iteration
    // after an evaluation runs longer (its memory mapped again, caches
    // cold), and the job's own timing counts that.
    return IterationCut{r->first, after / steady, before >= after - steady};
  };
  return SplitMarked(steps, marked, backward_starts, cut_of, bounds,
                     "; the iteration after it, from its data loading on, is measured on its own");
}


namespace {

// The most CPU time that starting a new epoch's DataLoader workers may
// explain in a step that forked: see the header.
double EpochStartAllowanceNs(const StepCpuWork& work, const CpuExtra& extra, uint64_t steady_faults) {
  const double fork =
      work.fork_in_stretches ? kEpochStartMaxExtraSteps * static_cast<double>(extra.steady_total_ns) : 0;
  const uint64_t extra_faults = work.page_faults > steady_faults ? work.page_faults - steady_faults : 0;
  return fork + static_cast<double>(extra_faults) * static_cast<double>(kForkFaultMaxNs);
}

// The steps that forked, and each one's next, whose extra together starting
// a new epoch's DataLoader workers explains.
std::vector<bool> EpochStarts(const std::vector<StepCpuWork>& work, const std::vector<CpuExtra>& extra) {
  const size_t n = work.size();
  std::vector<uint64_t> faults(n);
  for (size_t k = 0; k < n; ++k) faults[k] = work[k].page_faults;
  const uint64_t steady_faults = Median(faults);
  std::vector<bool> epoch_start(n, false);
  for (size_t k = 0; k < n; ++k) {
    if (!work[k].forked) continue;
    const size_t last = k + 1 < n && !work[k + 1].forked ? k + 1 : k;
    double extra_ns = 0, allowance_ns = 0;
    for (size_t j = k; j <= last; ++j) {
      extra_ns += static_cast<double>(extra[j].ns);
      allowance_ns += EpochStartAllowanceNs(work[j], extra[j], steady_faults);
    }
    for (size_t j = k; j <= last; ++j) epoch_start[j] = extra_ns <= allowance_ns;
  }
  return epoch_start;
}

// Steps that call the autograd engine far more often than the median step
// outside the loop's loss.backward() (see the header), marked left out.
size_t MarkExtraEngineCallSteps(std::vector<StepWindow>& steps, const std::vector<StepCpuWork>& work,
                                std::vector<size_t>* marked_steps) {
  const size_t n = steps.size();
  std::vector<uint64_t> calls(n);
  for (size_t k = 0; k < n; ++k) calls[k] = work[k].other_engine_calls;
  const uint64_t median = Median(calls);
  return MarkStepsApart(
      steps, [&](size_t k) { return work[k].other_engine_calls >= 2 * median + kMinExtraEngineCalls; },
      [&](size_t k) {
        return absl::StrFormat(
            "extra autograd work: %d calls of the autograd engine besides the loop's loss.backward(), the median "
            "step makes %d (an evaluation that adapts with torch.autograd.grad before it scores?)",
            work[k].other_engine_calls, median);
      },
      marked_steps);
}

// Steps in which the loop started a DataLoader whose workers ended before
// its next backward pass, with extra CPU work (see the header).
size_t MarkEvaluationLoaderSteps(std::vector<StepWindow>& steps, const std::vector<StepCpuWork>& work,
                                 const std::vector<CpuExtra>& extra, std::vector<size_t>* marked_steps) {
  return MarkStepsApart(
      steps, [&](size_t k) { return work[k].evaluation_loader && extra[k].ns >= kMinCpuExtraNs; },
      [&](size_t k) {
        return absl::StrFormat(
            "an evaluation's DataLoader: the loop's thread started worker processes that ended before its next "
            "backward pass, and ran %.3f ms more than the steady step around it (%.3f ms)",
            extra[k].ns / 1e6, extra[k].steady_total_ns / 1e6);
      },
      marked_steps);
}

}  // namespace

size_t MarkExtraCpuWorkSteps(std::vector<StepWindow>& steps, const std::vector<StepCpuWork>& work,
                             std::vector<size_t>* marked_steps) {
  const size_t n = steps.size();
  if (n < kMinSteps || work.size() != n) return 0;
  std::vector<uint64_t> totals;
  for (const StepCpuWork& w : work) totals.push_back(Sum(w.stretches_ns));
  if (Median(totals) == 0) return 0;
  size_t marked = MarkExtraEngineCallSteps(steps, work, marked_steps);
  const std::vector<CpuExtra> extra = CpuExtras(steps, work, totals, SteadyStretches(work));
  marked += MarkEvaluationLoaderSteps(steps, work, extra, marked_steps);
  if (marked_steps != nullptr) std::sort(marked_steps->begin(), marked_steps->end());
  const std::vector<bool> epoch_start = EpochStarts(work, extra);
  // Each extra as a share of its steady step; steps already left out
  // (warm-up: its first-time work can dwarf an evaluation pass) do not set
  // the break.
  std::vector<double> share(n, 0);
  std::vector<double> sorted;
  for (size_t k = 0; k < n; ++k) {
    share[k] = extra[k].ns >= kMinCpuExtraNs ? extra[k].share() : 0;
    if (!steps[k].warmup && steps[k].left_out.empty() && !epoch_start[k]) sorted.push_back(share[k]);
  }
  if (sorted.empty()) return marked;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  // The first break from the top: the largest extras that stand apart.
  double threshold = 0;  // 0: none stands apart
  const size_t most = std::min(sorted.size(), static_cast<size_t>(kMaxExtraShare * static_cast<double>(n)));
  for (size_t c = 1; c <= most && threshold == 0; ++c) {
    const double next = c < sorted.size() ? sorted[c] : 0;
    if (sorted[c - 1] >= kMinCpuExtraOfStep && sorted[c - 1] >= kCpuExtraGap * next) threshold = sorted[c - 1];
  }
  if (threshold == 0) return marked;
  // Extras that would move the mean step by less than kMinCpuExtraOfRun
  // stay in: telling so little from noise is not worth the risk.
  double run = 0, extras = 0;
  for (size_t k = 0; k < n; ++k) {
    if (steps[k].warmup || !steps[k].left_out.empty()) continue;
    run += static_cast<double>(totals[k]);
    if (share[k] >= threshold && !epoch_start[k]) extras += static_cast<double>(extra[k].ns);
  }
  if (extras < kMinCpuExtraOfRun * run) return marked;
  for (size_t k = 0; k < n; ++k) {
    StepWindow& w = steps[k];
    if (w.warmup || !w.left_out.empty() || share[k] < threshold || epoch_start[k]) continue;
    w.warmup = true;
    w.left_out = absl::StrFormat(
        "extra CPU work: the loop's thread ran %.3f ms more than the steady step around it (%.3f ms) between two "
        "marks, with no backward pass in that stretch (an evaluation pass or checkpoint?)",
        extra[k].ns / 1e6, extra[k].steady_total_ns / 1e6);
    ++marked;
    if (marked_steps != nullptr) marked_steps->push_back(k);
  }
  if (marked_steps != nullptr) std::sort(marked_steps->begin(), marked_steps->end());
  return marked;
}

}  // namespace gpuos
