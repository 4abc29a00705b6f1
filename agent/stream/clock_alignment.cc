// Clock alignment between hosts; see clock_alignment.h.
#include "stream/clock_alignment.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include "common/median.h"

namespace gpuos {
namespace {

// Traces written before pairs stated their uncertainty: five back-to-back
// clock_gettime readings take well under a microsecond on any host.
constexpr uint64_t kUnstatedPairUncertaintyNs = 1000;

uint64_t Uncertainty(const v1::ClockPair& pair) {
  return pair.uncertainty_ns() ? pair.uncertainty_ns() : kUnstatedPairUncertaintyNs;
}

int64_t Offset(const v1::ClockPair& pair) {
  return static_cast<int64_t>(pair.realtime_ns()) - static_cast<int64_t>(pair.monotonic_ns());
}

uint64_t AbsDiff(int64_t a, int64_t b) {
  return a > b ? static_cast<uint64_t>(a - b) : static_cast<uint64_t>(b - a);
}

// Every `step`-th element, so the pairing stays cheap for long runs.
std::vector<uint64_t> Thin(const std::vector<uint64_t>& values, size_t at_most) {
  if (values.size() <= at_most) return values;
  std::vector<uint64_t> out;
  const double step = static_cast<double>(values.size()) / at_most;
  for (size_t i = 0; i < at_most; ++i) out.push_back(values[static_cast<size_t>(i * step)]);
  return out;
}

uint64_t MedianGap(const std::vector<uint64_t>& sorted) {
  std::vector<uint64_t> gaps;
  for (size_t i = 1; i < sorted.size(); ++i) gaps.push_back(sorted[i] - sorted[i - 1]);
  return Median(std::move(gaps));
}

// Ends closer than a quarter of the usual spacing pair up; farther apart
// they belong to different collectives.  Both sorted.
uint64_t PairingTolerance(const std::vector<uint64_t>& reference, const std::vector<uint64_t>& host) {
  return std::max<uint64_t>(std::min(MedianGap(reference), MedianGap(host)) / 4, 1);
}

// ref[k] - (the nearest shifted host end), for the ends that have one
// within `tolerance`.
std::vector<int64_t> Residuals(const std::vector<uint64_t>& ref, const std::vector<uint64_t>& host,
                               int64_t shift, uint64_t tolerance) {
  std::vector<int64_t> residuals;
  for (uint64_t r : ref) {
    const int64_t target = static_cast<int64_t>(r) - shift;  // in host time
    auto it = std::lower_bound(host.begin(), host.end(), static_cast<uint64_t>(std::max<int64_t>(target, 0)));
    int64_t best = 0;
    uint64_t best_distance = ~0ull;
    for (auto candidate : {it, it == host.begin() ? host.end() : it - 1}) {
      if (candidate == host.end()) continue;
      const int64_t residual = static_cast<int64_t>(r) - (static_cast<int64_t>(*candidate) + shift);
      const uint64_t distance = AbsDiff(residual, 0);
      if (distance < best_distance) {
        best_distance = distance;
        best = residual;
      }
    }
    if (best_distance <= tolerance) residuals.push_back(best);
  }
  return residuals;
}

using StepsByIndex = std::map<uint64_t, const StepCollectiveEnds*>;

const StepCollectiveEnds* PairedStep(const StepsByIndex& reference, const StepCollectiveEnds& host, int64_t offset) {
  if (host.ends_ns.empty()) return nullptr;
  const int64_t index = static_cast<int64_t>(host.step) + offset;
  if (index < 0) return nullptr;
  auto it = reference.find(static_cast<uint64_t>(index));
  return it == reference.end() || it->second->ends_ns.empty() ? nullptr : it->second;
}

// Reference - host of the last ends of the steps paired at `offset`.
std::vector<int64_t> LastEndDifferences(const StepsByIndex& reference, const std::vector<StepCollectiveEnds>& host,
                                        int64_t offset) {
  std::vector<int64_t> differences;
  for (const StepCollectiveEnds& h : host) {
    if (const StepCollectiveEnds* r = PairedStep(reference, h, offset)) {
      differences.push_back(static_cast<int64_t>(r->ends_ns.back()) - static_cast<int64_t>(h.ends_ns.back()));
    }
  }
  return differences;
}

// How well host step k + `offset` = reference step pairs: the steps paired
// and the median difference of their last ends.
struct StepOffset {
  int64_t offset = 0;
  size_t pairs = 0;
  int64_t median_ns = 0;
};

StepOffset ScoreStepOffset(const StepsByIndex& reference, const std::vector<StepCollectiveEnds>& host,
                           int64_t offset) {
  StepOffset out;
  out.offset = offset;
  std::vector<int64_t> differences = LastEndDifferences(reference, host, offset);
  out.pairs = differences.size();
  if (!differences.empty()) out.median_ns = Median(std::move(differences));
  return out;
}

// The step offset: candidates around the reference step that `coarse`
// puts the middle host step's last end nearest to.
std::optional<int64_t> ChooseStepOffset(const StepsByIndex& reference, const std::vector<StepCollectiveEnds>& host,
                                        int64_t coarse_ns) {
  std::vector<const StepCollectiveEnds*> with_ends;
  for (const StepCollectiveEnds& h : host) {
    if (!h.ends_ns.empty()) with_ends.push_back(&h);
  }
  if (with_ends.empty()) return std::nullopt;
  const StepCollectiveEnds& middle = *with_ends[with_ends.size() / 2];
  const int64_t target = static_cast<int64_t>(middle.ends_ns.back()) + coarse_ns;
  std::optional<int64_t> nearest;
  uint64_t nearest_distance = ~0ull;
  for (const auto& [index, r] : reference) {
    if (r->ends_ns.empty()) continue;
    const uint64_t distance = AbsDiff(static_cast<int64_t>(r->ends_ns.back()), target);
    if (distance < nearest_distance) {
      nearest_distance = distance;
      nearest = static_cast<int64_t>(index) - static_cast<int64_t>(middle.step);
    }
  }
  if (!nearest) return std::nullopt;
  std::vector<StepOffset> scores;
  size_t most = 0;
  for (int64_t offset = *nearest - 2; offset <= *nearest + 2; ++offset) {
    scores.push_back(ScoreStepOffset(reference, host, offset));
    most = std::max(most, scores.back().pairs);
  }
  const StepOffset* chosen = nullptr;
  for (const StepOffset& s : scores) {
    if (s.pairs == 0 || s.pairs * 10 < most * 9) continue;
    if (chosen == nullptr || AbsDiff(s.median_ns, coarse_ns) < AbsDiff(chosen->median_ns, coarse_ns)) chosen = &s;
  }
  if (chosen == nullptr) return std::nullopt;
  return chosen->offset;
}

// Every reference end minus every host end of each paired step (of the
// last kEndsPerStep ends of each side): (difference, host step).
constexpr size_t kEndsPerStep = 16;
std::vector<std::pair<int64_t, uint64_t>> StepDifferences(const StepsByIndex& reference,
                                                          const std::vector<StepCollectiveEnds>& host,
                                                          int64_t offset) {
  std::vector<std::pair<int64_t, uint64_t>> out;
  for (const StepCollectiveEnds& h : host) {
    const StepCollectiveEnds* r = PairedStep(reference, h, offset);
    if (r == nullptr) continue;
    const size_t rs = r->ends_ns.size(), hs = h.ends_ns.size();
    for (size_t i = rs > kEndsPerStep ? rs - kEndsPerStep : 0; i < rs; ++i) {
      for (size_t j = hs > kEndsPerStep ? hs - kEndsPerStep : 0; j < hs; ++j) {
        out.emplace_back(static_cast<int64_t>(r->ends_ns[i]) - static_cast<int64_t>(h.ends_ns[j]), h.step);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The difference that the most steps have one within `window` of (sorted
// `differences`); among equals the one nearest `near`.
int64_t MostSharedDifference(const std::vector<std::pair<int64_t, uint64_t>>& differences, uint64_t window,
                             int64_t near) {
  std::map<uint64_t, size_t> in_window;  // step -> its differences in the window
  size_t best_steps = 0;
  int64_t best = near;
  for (size_t lo = 0, hi = 0; hi < differences.size(); ++hi) {
    ++in_window[differences[hi].second];
    while (static_cast<uint64_t>(differences[hi].first - differences[lo].first) > 2 * window) {
      auto it = in_window.find(differences[lo++].second);
      if (--it->second == 0) in_window.erase(it);
    }
    const int64_t middle = differences[lo].first + (differences[hi].first - differences[lo].first) / 2;
    if (in_window.size() > best_steps ||
        (in_window.size() == best_steps && AbsDiff(middle, near) < AbsDiff(best, near))) {
      best_steps = in_window.size();
      best = middle;
    }
  }
  return best;
}

}  // namespace

WallClockOffset WallClockOffsetOf(const v1::ClockPair& start, const v1::ClockPair* end) {
  WallClockOffset out;
  const int64_t at_start = Offset(start);
  if (end == nullptr || end->monotonic_ns() == 0 || end->realtime_ns() == 0) {
    out.offset_ns = at_start;
    out.uncertainty_ns = Uncertainty(start);
    return out;
  }
  const int64_t at_end = Offset(*end);
  // The midpoint is off by at most half the change at either end of the
  // recording (the wall clock is slewed smoothly in between).
  out.offset_ns = at_start + (at_end - at_start) / 2;
  out.uncertainty_ns = (AbsDiff(at_start, at_end) + 1) / 2 +
                       std::max(Uncertainty(start), Uncertainty(*end));
  return out;
}

SkewEstimate SkewFromWallClocks(const WallClockOffset& reference, const WallClockOffset& host) {
  // wall = host_mono + host.offset = ref_mono + reference.offset.
  SkewEstimate out;
  out.skew_ns = host.offset_ns - reference.offset_ns;
  out.bound_ns = host.uncertainty_ns + reference.uncertainty_ns;
  out.basis = "wall_clock";
  return out;
}

std::optional<SkewEstimate> RefineSkewFromCollectives(std::vector<uint64_t> reference_ends,
                                                      std::vector<uint64_t> host_ends,
                                                      const SkewEstimate& coarse) {
  constexpr size_t kMinMatched = 3;
  if (reference_ends.size() < kMinMatched || host_ends.size() < kMinMatched) return std::nullopt;
  std::sort(reference_ends.begin(), reference_ends.end());
  std::sort(host_ends.begin(), host_ends.end());
  const std::vector<uint64_t> ref = Thin(reference_ends, 4000);
  const uint64_t tolerance = PairingTolerance(reference_ends, host_ends);

  // Candidate shifts: the middle reference end against host ends near where
  // the coarse skew puts it (the coarse skew is off by a few collectives at
  // most, or the pairing cannot be told from a shift by whole periods).
  const uint64_t middle = ref[ref.size() / 2];
  const int64_t middle_in_host = static_cast<int64_t>(middle) - coarse.skew_ns;
  const size_t near = static_cast<size_t>(
      std::lower_bound(host_ends.begin(), host_ends.end(),
                       static_cast<uint64_t>(std::max<int64_t>(middle_in_host, 0))) -
      host_ends.begin());
  constexpr size_t kLags = 50;
  const size_t first = near > kLags ? near - kLags : 0;
  const size_t last = std::min(host_ends.size(), near + kLags + 1);

  struct Candidate {
    int64_t extra = 0;  // on top of coarse.skew_ns
    std::vector<int64_t> residuals;
  };
  std::vector<Candidate> candidates;
  size_t most = 0;
  for (size_t j = first; j < last; ++j) {
    Candidate c;
    c.extra = static_cast<int64_t>(middle) - (static_cast<int64_t>(host_ends[j]) + coarse.skew_ns);
    c.residuals = Residuals(ref, host_ends, coarse.skew_ns + c.extra, tolerance);
    most = std::max(most, c.residuals.size());
    candidates.push_back(std::move(c));
  }
  if (most < kMinMatched) return std::nullopt;
  // Near-equal pairings (an overlap that differs by an edge collective):
  // the one the wall clocks favour.
  const Candidate* chosen = nullptr;
  for (const Candidate& c : candidates) {
    if (c.residuals.size() * 10 < most * 9) continue;
    if (chosen == nullptr || AbsDiff(c.extra, 0) < AbsDiff(chosen->extra, 0)) chosen = &c;
  }
  const std::vector<int64_t>& residuals = chosen->residuals;
  const int64_t median = Median(residuals);
  uint64_t spread = 0;
  for (int64_t r : residuals) spread = std::max(spread, AbsDiff(r, median));

  SkewEstimate out;
  out.skew_ns = coarse.skew_ns + chosen->extra + median;
  out.bound_ns = spread;
  out.basis = "collectives";
  out.collectives_matched = static_cast<uint32_t>(residuals.size());
  return out;
}

std::optional<SkewEstimate> RefineSkewFromStepCollectives(const std::vector<StepCollectiveEnds>& reference,
                                                          const std::vector<StepCollectiveEnds>& host,
                                                          const SkewEstimate& coarse) {
  constexpr size_t kMinMatched = 3;
  StepsByIndex by_index;
  for (const StepCollectiveEnds& r : reference) by_index[r.step] = &r;
  const std::optional<int64_t> offset = ChooseStepOffset(by_index, host, coarse.skew_ns);
  if (!offset) return std::nullopt;
  const std::vector<std::pair<int64_t, uint64_t>> differences = StepDifferences(by_index, host, *offset);
  const int64_t shared = MostSharedDifference(differences, kSameExchangeNs,
                                              ScoreStepOffset(by_index, host, *offset).median_ns);
  // Each step's difference nearest the shared one, within the window.
  std::map<uint64_t, int64_t> nearest;
  for (const auto& [d, step] : differences) {
    if (AbsDiff(d, shared) > kSameExchangeNs) continue;
    auto [it, inserted] = nearest.try_emplace(step, d);
    if (!inserted && AbsDiff(d, shared) < AbsDiff(it->second, shared)) it->second = d;
  }
  if (nearest.size() < kMinMatched) return std::nullopt;
  std::vector<int64_t> kept;
  for (const auto& [step, d] : nearest) kept.push_back(d);
  SkewEstimate out;
  out.skew_ns = Median(kept);
  for (int64_t d : kept) out.bound_ns = std::max(out.bound_ns, AbsDiff(d, out.skew_ns));
  out.bound_ns += kSameExchangeNs;  // a lag common to every step (see the header)
  out.basis = "cpu_collectives";
  out.collectives_matched = static_cast<uint32_t>(kept.size());
  return out;
}

}  // namespace gpuos
