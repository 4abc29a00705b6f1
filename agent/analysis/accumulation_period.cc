// Backward passes grouped by the period of the CPU work between them; see
// accumulation_period.h.
#include "analysis/accumulation_period.h"

#include <algorithm>
#include <cmath>

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

Candidate Score(const std::vector<uint64_t>& w, uint32_t k, uint32_t phase) {
  Candidate c;
  c.k = k;
  c.phase = phase;
  std::vector<uint64_t> update, other;
  for (size_t j = 0; j < w.size(); ++j) (j % k == phase ? update : other).push_back(w[j]);
  for (size_t j = phase; j < w.size(); j += k) {
    if (j + 1 < k) continue;
    ++c.groups;
    bool busiest = true;
    for (size_t i = j + 1 - k; i < j && busiest; ++i) busiest = w[j] > w[i];
    c.wins += busiest;
  }
  c.chance = BinomialTail(c.groups, c.wins, 1.0 / k);
  c.update_median = Median(std::move(update));
  c.other_median = Median(std::move(other));
  c.ratio = c.other_median > 0 ? static_cast<double>(c.update_median) / static_cast<double>(c.other_median) : 0;
  return c;
}

bool Qualifies(const Candidate& c, const AccumulationOptions& o) {
  return c.groups > 0 && c.share() >= o.min_win_share && c.chance <= o.max_chance && c.ratio >= o.min_ratio;
}

std::string Evidence(const Candidate& c) {
  return absl::StrFormat(
      "k=%d: the interval after backward passes %d, %d, %d... (counting from 0) ran longer than the %d before it "
      "in %d of %d groups (%.0f%%), median CPU time %.3f ms vs %.3f ms for the others",
      c.k, c.phase, c.phase + c.k, c.phase + 2 * c.k, c.k - 1, c.wins, c.groups, 100 * c.share(),
      c.update_median / 1e6, c.other_median / 1e6);
}

}  // namespace

AccumulationPeriod FindAccumulationPeriod(const std::vector<uint64_t>& work_ns, const AccumulationOptions& options) {
  AccumulationPeriod r;
  std::vector<Candidate> all;
  for (uint32_t k = 2; k <= options.max_k; ++k) {
    if (work_ns.size() < 2 * static_cast<size_t>(k)) break;
    for (uint32_t p = 0; p < k; ++p) all.push_back(Score(work_ns, k, p));
  }
  const Candidate* best = nullptr;  // the smallest qualifying k, its best phase
  const Candidate* closest = nullptr;
  for (const Candidate& c : all) {
    if (closest == nullptr || c.share() > closest->share()) closest = &c;
    if (!Qualifies(c, options)) continue;
    if (best == nullptr || c.k < best->k || (c.k == best->k && c.share() > best->share())) best = &c;
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
  r.evidence = Evidence(*best);
  for (const Candidate& c : all) {
    if (Qualifies(c, options) && c.k % best->k != 0) {
      r.ambiguous = true;
      r.evidence = absl::StrCat(r.evidence, "; but also ", Evidence(c));
      return r;
    }
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

// The intervals at or above ClearUpdateThreshold, from the first one at the
// period's phase (the trace may begin inside a group, and a slow first
// interval is warm-up).  Where several come closer than k backward passes
// (an update and noise), one stays: the one a multiple of k before the next
// one after them, else the last (an update closes its group).  None when
// that happens too often (more than 1 in 20 groups).
std::vector<size_t> ClearUpdates(const std::vector<uint64_t>& work_ns, const AccumulationPeriod& period) {
  const double threshold = ClearUpdateThreshold(work_ns, period);
  if (threshold <= 0) return {};
  std::vector<size_t> hits;
  for (size_t j = 0; j < work_ns.size(); ++j) {
    if (static_cast<double>(work_ns[j]) < threshold) continue;
    if (hits.empty() && j % period.k != period.phase) continue;
    hits.push_back(j);
  }
  std::vector<size_t> updates;
  size_t crowded = 0;
  for (size_t i = 0; i < hits.size();) {
    size_t last = i;  // the cluster hits[i..last]
    while (last + 1 < hits.size() && hits[last + 1] - hits[last] < period.k) ++last;
    size_t keep = hits[last];
    if (last > i && last + 1 < hits.size()) {
      size_t on_period = 0;
      for (size_t c = i; c <= last; ++c) {
        if ((hits[last + 1] - hits[c]) % period.k == 0) keep = hits[c], ++on_period;
      }
      if (on_period != 1) keep = hits[last];
    }
    crowded += last - i;
    updates.push_back(keep);
    i = last + 1;
  }
  if (updates.size() < 2 || crowded > updates.size() / 20) return {};
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
  if (std::vector<size_t> clear = ClearUpdates(work_ns, period); !clear.empty()) return clear;
  std::vector<size_t> updates;
  for (size_t j = period.phase; j < work_ns.size(); j += period.k) updates.push_back(j);
  return updates;
}

}  // namespace gpuos
