// Backward passes grouped by the period of the CPU work between them; see
// accumulation_period.h.
#include "analysis/accumulation_period.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/median.h"

namespace gpuos {
namespace {

struct Candidate {
  uint32_t k = 0;
  uint32_t phase = 0;
  size_t groups = 0;
  size_t wins = 0;
  double chance = 1;
  uint64_t update_median = 0;
  uint64_t other_median = 0;
  double ratio = 0;
  std::vector<size_t> updates;  // a chain whose phase changes (PhaseChangingChain)
  size_t changes = 0;
  double share() const { return groups == 0 ? 0 : static_cast<double>(wins) / static_cast<double>(groups); }
};

// P(X >= wins) for X ~ Binomial(groups, q), in log space (groups can be
// thousands).
double BinomialTail(size_t groups, size_t wins, double q) {
  double tail = 0;
  for (size_t x = wins; x <= groups; ++x) {
    const double log_p = std::lgamma(groups + 1.0) - std::lgamma(x + 1.0) - std::lgamma(groups - x + 1.0) +
                         x * std::log(q) + (groups - x) * std::log1p(-q);
    tail += std::exp(log_p);
  }
  return std::min(1.0, tail);
}

// Medians of the update intervals and of the others, and their ratio.
void SetMedians(const std::vector<uint64_t>& w, const std::vector<bool>& is_update, Candidate& c) {
  std::vector<uint64_t> update, other;
  for (size_t j = 0; j < w.size(); ++j) (is_update[j] ? update : other).push_back(w[j]);
  c.update_median = Median(std::move(update));
  c.other_median = Median(std::move(other));
  c.ratio = c.other_median > 0 ? static_cast<double>(c.update_median) / static_cast<double>(c.other_median) : 0;
}

// Whether interval j ran longer than the g-1 before it (the group it closes).
bool ClosesAWin(const std::vector<uint64_t>& w, size_t j, size_t g) {
  for (size_t i = j + 1 - g; i < j; ++i) {
    if (w[j] <= w[i]) return false;
  }
  return true;
}

Candidate Score(const std::vector<uint64_t>& w, uint32_t k, uint32_t phase) {
  Candidate c;
  c.k = k;
  c.phase = phase;
  for (size_t j = phase; j < w.size(); j += k) {
    if (j + 1 < k) continue;
    ++c.groups;
    c.wins += ClosesAWin(w, j, k);
  }
  c.chance = BinomialTail(c.groups, c.wins, 1.0 / k);
  std::vector<bool> is_update(w.size());
  for (size_t j = 0; j < w.size(); ++j) is_update[j] = j % k == phase;
  SetMedians(w, is_update, c);
  return c;
}

// Whether interval j, closing a group of g intervals where k is the period,
// ran longer than the others of its group or, for a short group, than the
// k-1 intervals before it other than the update that opened the group.
bool LooksLikeAnUpdate(const std::vector<uint64_t>& w, size_t j, size_t g, size_t k) {
  if (g >= k) return ClosesAWin(w, j, g);
  if (j < k) return false;
  for (size_t i = j - k; i < j; ++i) {
    if (i != j - g && w[j] <= w[i]) return false;
  }
  return true;
}

// How much interval j looks like an update: on a log scale, 1 at the
// updates' median, 0 at the threshold, -1 at the busiest other position's
// median, no lower than -kMaxMissScore (an evaluation's short gradient
// steps are far below, and no one interval outweighs many).
constexpr double kMaxMissScore = 3;
// What a group of more than k backward passes costs: one interval that
// ran like an update, or three that ran like no update, is not enough to
// break the period.
constexpr double kIrregularGroupCost = 3;

double UpdateScore(uint64_t work_ns, double threshold, double update_median) {
  const double scale = std::log(update_median / threshold);
  const double score = std::log(std::max<double>(static_cast<double>(work_ns), 1) / threshold) / scale;
  return std::clamp(score, -kMaxMissScore, 1.0);
}

// Which intervals hold an epoch's start, for ranges of them.
class EpochStartIndex {
 public:
  EpochStartIndex(const std::vector<bool>& starts, size_t n) : upto_(n + 1, 0) {
    for (size_t j = 0; j < n; ++j) upto_[j + 1] = upto_[j] + (j < starts.size() && starts[j]);
  }
  // Whether one of intervals from..to (both included) holds one.
  bool Any(size_t from, size_t to) const { return upto_[to + 1] > upto_[from]; }

 private:
  std::vector<size_t> upto_;
};

// How BestChain scores a chain of updates for period k; nullopt where a
// part is not allowed.
struct ChainScores {
  // A group of g intervals that update j closes, after the previous update.
  std::function<std::optional<double>(size_t j, size_t g)> group;
  // The trace's first group: the j+1 intervals up to update j.
  std::function<std::optional<double>(size_t j)> first;
  // The `after` intervals that follow the chain's last update.
  std::function<std::optional<double>(size_t after)> last;
  // Update j itself.
  std::function<double(size_t j)> update = [](size_t) { return 0.0; };
};

// The chain of updates at most 2k-1 intervals apart with the best score,
// by dynamic programming over its last update (ties: the earlier found);
// empty where none is allowed.
std::vector<size_t> BestChain(size_t n, size_t k, const ChainScores& scores) {
  constexpr size_t kStart = SIZE_MAX;
  const size_t max_gap = 2 * k - 1;
  std::vector<std::optional<double>> best(n);
  std::vector<size_t> before(n, kStart);
  for (size_t j = 0; j < n; ++j) {
    if (j + 1 <= max_gap) best[j] = scores.first(j);
    for (size_t g = 1; g <= max_gap && g <= j; ++g) {
      if (!best[j - g]) continue;
      const std::optional<double> here = scores.group(j, g);
      if (here && (!best[j] || *best[j - g] + *here > *best[j])) best[j] = *best[j - g] + *here, before[j] = j - g;
    }
    if (best[j]) *best[j] += scores.update(j);
  }
  size_t last = kStart;
  double total = 0;
  for (size_t j = 0; j < n; ++j) {
    const std::optional<double> tail = best[j] ? scores.last(n - 1 - j) : std::nullopt;
    if (tail && (last == kStart || *best[j] + *tail > total)) total = *best[j] + *tail, last = j;
  }
  std::vector<size_t> chain;
  for (size_t j = last; j != kStart; j = before[j]) chain.push_back(j);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// The chain of updates for k whose phase may change (see the header)
// (BestChain): each group of k scores its win; each group of another size
// (1 to 2k-1 intervals), only where it holds an epoch's start, costs
// kPhaseChangeCost wins where its last interval looks like an update
// (LooksLikeAnUpdate) and 1.5 more where not, so of two ways to move the
// phase (a group of k+r, or one of r and one of k) the one whose updates
// look like updates wins.  The trace may begin and end inside a group.
// Its chance is that of its wins among its groups of k, times the ways to
// place its phase changes among its groups.
Candidate PhaseChangingChain(const std::vector<uint64_t>& w, const std::vector<bool>& epoch_starts, uint32_t k) {
  const size_t n = w.size();
  const EpochStartIndex starts(epoch_starts, n);
  // In half wins.
  const double cost = 2.0 * static_cast<double>(kPhaseChangeCost);
  ChainScores scores;
  scores.group = [&](size_t j, size_t g) -> std::optional<double> {
    if (g == k) return ClosesAWin(w, j, k) ? 2.0 : 0.0;
    if (!starts.Any(j + 1 - g, j)) return std::nullopt;
    return -cost - (LooksLikeAnUpdate(w, j, g, k) ? 0 : 3);
  };
  scores.first = [&](size_t j) -> std::optional<double> { return j + 1 < k ? 0.0 : scores.group(j, j + 1); };
  scores.last = [&](size_t after) -> std::optional<double> {
    if (after < k) return 0.0;
    if (after >= 2 * static_cast<size_t>(k) - 1 || !starts.Any(n - after, n - 1)) return std::nullopt;
    return -cost - 3;
  };
  Candidate c;
  c.k = k;
  c.updates = BestChain(n, k, scores);
  if (c.updates.empty()) return c;
  const size_t last = c.updates.back();
  std::vector<bool> is_update(n, false);
  for (size_t i = 0; i < c.updates.size(); ++i) {
    const size_t j = c.updates[i];
    is_update[j] = true;
    const size_t g = i == 0 ? j + 1 : j - c.updates[i - 1];
    if (g == k) {
      ++c.groups;
      c.wins += ClosesAWin(w, j, k);
    } else if (i > 0 || g > k) {
      ++c.changes;
    }
  }
  c.phase = static_cast<uint32_t>(last % k);
  SetMedians(w, is_update, c);
  const double places = static_cast<double>(c.groups + c.changes);
  const double log_ways = std::lgamma(places + 1.0) - std::lgamma(c.changes + 1.0) - std::lgamma(c.groups + 1.0);
  c.chance = std::min(1.0, BinomialTail(c.groups, c.wins, 1.0 / k) * std::exp(log_ways));
  return c;
}

// A chain whose phase changes, placed again by how much each update looks
// like one (UpdateScore against the chain's own medians) rather than by
// wins, its groups of another size again only where an epoch starts: where
// the phase moves, a group of k that won by noise must not decide between
// a group of k+r and one of r followed by one of k.  Each group of another
// size costs kPhaseChangeCost; the trace may begin and end inside a group.
// The chain found by wins where the medians do not tell updates apart.
std::vector<size_t> PlaceChangingChain(const std::vector<uint64_t>& w, const std::vector<bool>& epoch_starts,
                                       const Candidate& chain) {
  const double update = static_cast<double>(chain.update_median);
  const double other = static_cast<double>(chain.other_median);
  const size_t n = w.size(), k = chain.k;
  if (other <= 0 || update <= other || n < k) return chain.updates;
  const EpochStartIndex starts(epoch_starts, n);
  const double threshold = std::sqrt(update * other), cost = static_cast<double>(kPhaseChangeCost);
  ChainScores scores;
  scores.group = [&](size_t j, size_t g) -> std::optional<double> {
    if (g == k) return 0.0;
    if (!starts.Any(j + 1 - g, j)) return std::nullopt;
    return -cost;
  };
  scores.first = [&](size_t j) -> std::optional<double> {
    if (j + 1 <= k) return 0.0;
    if (!starts.Any(0, j)) return std::nullopt;
    return -cost;
  };
  scores.last = [&](size_t after) -> std::optional<double> {
    if (after < k) return 0.0;
    if (after >= 2 * k - 1 || !starts.Any(n - after, n - 1)) return std::nullopt;
    return -cost;
  };
  scores.update = [&](size_t j) { return UpdateScore(w[j], threshold, update); };
  std::vector<size_t> placed = BestChain(n, k, scores);
  return placed.empty() ? chain.updates : placed;
}

// How much more often a multiple of the smallest qualifying k must win to be
// the period instead (see FindAccumulationPeriod).
constexpr double kMultipleWinMargin = 0.1;

bool Qualifies(const Candidate& c, const AccumulationOptions& o) {
  return c.groups > 0 && c.share() >= o.min_win_share && c.chance <= o.max_chance && c.ratio >= o.min_ratio;
}

std::string Evidence(const Candidate& c) {
  if (!c.updates.empty()) {
    return absl::StrFormat(
        "k=%d with the phase changing %d times (groups of another size, as where an epoch ends inside a group): the "
        "interval that closes a group ran longer than the %d before it in %d of %d groups of %d (%.0f%%), median "
        "CPU time %.3f ms vs %.3f ms for the others",
        c.k, c.changes, c.k - 1, c.wins, c.groups, c.k, 100 * c.share(), c.update_median / 1e6,
        c.other_median / 1e6);
  }
  return absl::StrFormat(
      "k=%d: the interval after backward passes %d, %d, %d... (counting from 0) ran longer than the %d before it "
      "in %d of %d groups (%.0f%%), median CPU time %.3f ms vs %.3f ms for the others",
      c.k, c.phase, c.phase + c.k, c.phase + 2 * c.k, c.k - 1, c.wins, c.groups, 100 * c.share(),
      c.update_median / 1e6, c.other_median / 1e6);
}

// The period among candidates that qualify under `o`: the smallest k with
// its best phase, or a multiple of it that wins clearly more often (with
// accumulation of k, a divisor d of k qualifies too: its groups that hold
// an update win, the others win 1/d of the time, 3/4 for k=4, d=2).
// Ambiguous where another qualifying k neither divides it nor is a multiple.
const Candidate* Select(const std::vector<Candidate>& all, const AccumulationOptions& o, bool& ambiguous,
                        std::string& also) {
  const Candidate* best = nullptr;
  for (const Candidate& c : all) {
    if (!Qualifies(c, o)) continue;
    if (best == nullptr || c.k < best->k || (c.k == best->k && c.share() > best->share())) best = &c;
  }
  for (const Candidate& c : all) {
    if (best != nullptr && Qualifies(c, o) && c.k > best->k && c.k % best->k == 0 &&
        c.share() >= best->share() + kMultipleWinMargin) {
      best = &c;
    }
  }
  ambiguous = false;
  for (const Candidate& c : all) {
    if (best != nullptr && Qualifies(c, o) && c.k % best->k != 0 && best->k % c.k != 0) {
      ambiguous = true;
      also = Evidence(c);
      break;
    }
  }
  return best;
}

}  // namespace

AccumulationPeriod FindAccumulationPeriod(const std::vector<uint64_t>& work_ns, const std::vector<bool>& epoch_starts,
                                          const AccumulationOptions& options) {
  AccumulationPeriod r;
  std::vector<Candidate> all;
  for (uint32_t k = 2; k <= options.max_k; ++k) {
    if (work_ns.size() < 2 * static_cast<size_t>(k)) break;
    for (uint32_t p = 0; p < k; ++p) all.push_back(Score(work_ns, k, p));
  }
  const Candidate* closest = nullptr;
  for (const Candidate& c : all) {
    if (closest == nullptr || c.share() > closest->share()) closest = &c;
  }
  // Every (k, phase) pair and every chain is a chance to win by luck: the
  // bound is for them all.
  const size_t chains = all.empty() ? 0 : all.back().k - 1;
  AccumulationOptions per_candidate = options;
  per_candidate.max_chance = all.empty() ? options.max_chance
                                         : options.max_chance / static_cast<double>(all.size() + chains);
  bool ambiguous = false;
  std::string also;
  const Candidate* best = Select(all, per_candidate, ambiguous, also);
  std::vector<Candidate> changing;
  const bool any_epoch_start = std::find(epoch_starts.begin(), epoch_starts.end(), true) != epoch_starts.end();
  for (uint32_t k = 2; any_epoch_start && k < 2 + chains; ++k) {
    Candidate c = PhaseChangingChain(work_ns, epoch_starts, k);
    if (c.changes > 0) changing.push_back(std::move(c));
  }
  if (best == nullptr) {
    best = Select(changing, per_candidate, ambiguous, also);
  } else {
    // A phase that moves by a multiple of a divisor d of k keeps d's phase:
    // d qualifies with a fixed phase, k only as a chain.  And a chain of
    // the same k that wins clearly more often follows a phase that moved.
    for (const Candidate& c : changing) {
      if (Qualifies(c, per_candidate) && c.k % best->k == 0 && c.share() >= best->share() + kMultipleWinMargin) {
        best = &c;
      }
    }
  }
  if (best == nullptr) {
    r.evidence = closest == nullptr
                     ? absl::StrFormat("%d intervals are too few to compare groups", work_ns.size())
                     : absl::StrCat("no k from 2 to ", options.max_k,
                                    " makes one interval of each group the busiest (the closest, ",
                                    Evidence(*closest), ")");
    return r;
  }
  r.k = best->k;
  r.phase = best->phase;
  r.groups = best->groups;
  r.wins = best->wins;
  r.ratio = best->ratio;
  r.update_median_ns = best->update_median;
  r.other_median_ns = best->other_median;
  r.phase_changes = best->changes;
  if (r.phase_changes > 0) r.updates = PlaceChangingChain(work_ns, epoch_starts, *best);
  r.evidence = Evidence(*best);
  if (ambiguous) {
    r.ambiguous = true;
    r.evidence = absl::StrCat(r.evidence, "; but also ", also);
    return r;
  }
  r.found = true;
  return r;
}

namespace {

// The busiest of the k-1 positions that hold no update: the median of each
// position's intervals, the largest.
double BusiestOtherPosition(const std::vector<uint64_t>& work_ns, const AccumulationPeriod& period) {
  double busiest = 0;
  for (uint32_t p = 0; p < period.k; ++p) {
    if (p == period.phase) continue;
    std::vector<uint64_t> at;
    for (size_t j = p; j < work_ns.size(); j += period.k) at.push_back(work_ns[j]);
    busiest = std::max(busiest, static_cast<double>(Median(std::move(at))));
  }
  return busiest;
}


// The updates where they stand clear: of the sets of intervals at least k
// apart, the one whose intervals look most like updates (UpdateScore),
// each group of more than k backward passes costing kIrregularGroupCost (a
// run with no update, as an evaluation that adapts before it scores; the
// trace's first and last k-1 passes are free: it may begin and end inside
// a group).  So noise inside a group (closer than k to an update) is never
// an update, an update that ran short keeps its place when the ones around
// it stand, and a run of short intervals becomes one long group wherever
// it ends.  None when more than 1 in 20 of the updates chosen ran below the
// threshold (the period is not what the intervals follow).
std::vector<size_t> ClearUpdates(const std::vector<uint64_t>& work_ns, const AccumulationPeriod& period) {
  const double threshold = ClearUpdateThreshold(work_ns, period);
  const size_t n = work_ns.size(), k = period.k;
  if (threshold <= 0 || n < k) return {};
  constexpr size_t kStart = SIZE_MAX;
  std::vector<double> best(n);       // the best chain ending with an update at j
  std::vector<size_t> before(n);     // the update before j in it
  std::vector<size_t> best_upto(n);  // argmax of best[0..j]
  for (size_t j = 0; j < n; ++j) {
    double chain = j < k ? 0 : -kIrregularGroupCost;
    before[j] = kStart;
    if (j >= k && best[j - k] > chain) chain = best[j - k], before[j] = j - k;
    if (j > k && best[best_upto[j - k - 1]] - kIrregularGroupCost > chain) {
      chain = best[best_upto[j - k - 1]] - kIrregularGroupCost;
      before[j] = best_upto[j - k - 1];
    }
    best[j] = chain + UpdateScore(work_ns[j], threshold, static_cast<double>(period.update_median_ns));
    best_upto[j] = j > 0 && best[best_upto[j - 1]] >= best[j] ? best_upto[j - 1] : j;
  }
  size_t last = kStart;
  double total = 0;
  for (size_t j = 0; j < n; ++j) {
    const double end = best[j] - (n - 1 - j >= k ? kIrregularGroupCost : 0);
    if (last == kStart || end > total) last = j, total = end;
  }
  std::vector<size_t> updates;
  size_t weak = 0;
  for (size_t j = last; j != kStart; j = before[j]) {
    updates.push_back(j);
    weak += static_cast<double>(work_ns[j]) < threshold;
  }
  std::reverse(updates.begin(), updates.end());
  if (updates.size() < 2 || weak > updates.size() / 20) return {};
  return updates;
}


}  // namespace

double ClearUpdateThreshold(const std::vector<uint64_t>& work_ns, const AccumulationPeriod& period) {
  if (!period.found || period.k == 0) return 0;
  const double update = static_cast<double>(period.update_median_ns);
  const double other = BusiestOtherPosition(work_ns, period);
  if (other <= 0 || update < kClearUpdateRatio * other) return 0;
  return std::sqrt(update * other);
}

std::vector<size_t> UpdateIntervals(const std::vector<uint64_t>& work_ns, const AccumulationPeriod& period) {
  if (!period.found || period.k == 0) return {};
  if (!period.updates.empty()) return period.updates;
  if (std::vector<size_t> clear = ClearUpdates(work_ns, period); !clear.empty()) return clear;
  std::vector<size_t> updates;
  for (size_t j = period.phase; j < work_ns.size(); j += period.k) updates.push_back(j);
  return updates;
}

}  // namespace gpuos
