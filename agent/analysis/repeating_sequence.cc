// The repeating unit of a token sequence; see repeating_sequence.h.
#include "analysis/repeating_sequence.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/sequence_segmentation.h"
#include "common/count_in_range.h"
#include "common/median.h"

namespace gpuos {
namespace {

// A unit of a few tokens is weak evidence by its sequence alone (one
// kernel launched over and over repeats whatever its timing): it must also
// recur at steady intervals.
constexpr size_t kShortUnit = 3;
constexpr double kShortUnitMaxCv = 0.5;

// Or, after a long start-up (importing torch in a short run): many steady
// iterations covering most of the time where they occur.
constexpr size_t kManyIterations = 20;
constexpr double kManyIterationsRegionTimeShare = 0.6;

bool Qualifies(const Segmentation& s, const PeriodOptions& o) {
  return s.steady_count >= o.min_iterations && s.segment_share >= o.min_segment_share &&
         s.region_token_share >= o.min_token_share &&
         (s.time_share >= o.min_time_share ||
          (s.steady_count >= kManyIterations && s.region_time_share >= kManyIterationsRegionTimeShare)) &&
         s.median_ns >= o.min_period_ns &&
         (s.unit > kShortUnit || s.duration_cv <= kShortUnitMaxCv);
}

std::string Describe(const Segmentation& s, const PeriodOptions& o) {
  if (s.steady_count < o.min_iterations) {
    return absl::StrFormat("%d of %d segments alike, fewer than %d", s.steady_count, s.segments(), o.min_iterations);
  }
  if (s.segment_share < o.min_segment_share) {
    return absl::StrFormat("%d of %d segments alike (%.0f%% < %.0f%%)", s.steady_count, s.segments(),
                           100 * s.segment_share, 100 * o.min_segment_share);
  }
  if (s.region_token_share < o.min_token_share) {
    return absl::StrFormat("alike segments hold %.0f%% of the tokens where they occur (< %.0f%%)",
                           100 * s.region_token_share, 100 * o.min_token_share);
  }
  if (s.time_share < o.min_time_share) {
    return absl::StrFormat("alike segments cover %.0f%% of the time (< %.0f%%)", 100 * s.time_share,
                           100 * o.min_time_share);
  }
  if (s.median_ns < o.min_period_ns) {
    return absl::StrFormat("a unit lasts %.3f ms (< %.3f ms)", s.median_ns / 1e6, o.min_period_ns / 1e6);
  }
  return absl::StrFormat("a unit of %d tokens recurs at irregular intervals (CV %.2f > %.2f)", s.unit,
                         s.duration_cv, kShortUnitMaxCv);
}

// The median (over steady segments) of the irregular segments' length
// beyond the steady unit.
size_t MedianExtra(const Segmentation& s) {
  std::vector<size_t> extra;
  for (size_t i = 0; i < s.segments(); ++i) {
    if (s.steady[i]) continue;
    const size_t len = s.cuts[i + 1] - s.cuts[i];
    extra.push_back(len > s.unit ? len - s.unit : 0);
  }
  return Median(std::move(extra));
}

uint64_t Boundary(const std::vector<SequenceToken>& t, size_t cut, bool at_token) {
  if (cut == 0 || at_token) return t[cut].start_ns;
  const SequenceToken& prev = t[cut - 1];
  return std::max(prev.start_ns, std::min(prev.end_ns, t[cut].start_ns));
}

// The anchors to test: the first symbols of the count groups that hold
// the most tokens and of those with the most symbols, and the most frequent
// symbols.
std::vector<std::vector<uint32_t>> AnchorSets(const std::vector<uint32_t>& count, const std::vector<uint32_t>& order,
                                              const PeriodOptions& options) {
  // Count groups, the ones holding the most tokens first.
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> groups;
  for (uint32_t sym : order) {
    const uint32_t c = count[sym];
    if (c < options.min_iterations) continue;
    groups[c].push_back(sym);
  }
  std::vector<std::pair<uint64_t, uint32_t>> ranked;  // (tokens, count)
  for (const auto& [c, syms] : groups) ranked.emplace_back(static_cast<uint64_t>(c) * syms.size(), c);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  // Also the groups with the most symbols, whatever their mass: the
  // iteration count is the count shared by the most symbols, and an
  // optimizer step after 4 accumulated micro-batches makes few tokens
  // beside the micro-batches' many.
  std::vector<std::pair<uint64_t, uint32_t>> by_symbols;  // (symbols, count)
  for (const auto& [c, syms] : groups) {
    if (syms.size() >= 2) by_symbols.emplace_back(syms.size(), c);
  }
  std::sort(by_symbols.begin(), by_symbols.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (ranked.size() > options.count_groups) ranked.resize(options.count_groups);
  for (size_t i = 0; i < by_symbols.size() && i < options.count_groups / 2; ++i) {
    const uint32_t c = by_symbols[i].second;
    if (std::none_of(ranked.begin(), ranked.end(), [c](const auto& r) { return r.second == c; })) {
      ranked.emplace_back(static_cast<uint64_t>(c) * by_symbols[i].first, c);
    }
  }
  // Also the most frequent symbols: one token a step (a thread that only
  // blocks for its batch) makes a group of one.
  std::vector<uint32_t> frequent;
  for (uint32_t sym : order) {
    if (count[sym] >= options.min_iterations) frequent.push_back(sym);
  }
  std::partial_sort(frequent.begin(), frequent.begin() + std::min<size_t>(4, frequent.size()), frequent.end(),
                    [&](uint32_t a, uint32_t b) { return count[a] > count[b]; });
  frequent.resize(std::min<size_t>(4, frequent.size()));
  std::vector<std::vector<uint32_t>> anchor_sets;
  for (const auto& [mass, c] : ranked) {
    const std::vector<uint32_t>& syms = groups[c];
    anchor_sets.emplace_back(syms.begin(), syms.begin() + std::min<size_t>(syms.size(), options.anchors_per_group));
  }
  anchor_sets.push_back(frequent);
  return anchor_sets;
}

// Splits the sequence at each anchor's occurrences (each anchor once).
std::vector<Segmentation> TryAnchors(const std::vector<SequenceToken>& t,
                                     const std::vector<std::vector<uint32_t>>& anchor_sets,
                                     const std::vector<uint32_t>& count, size_t symbols,
                                     const PeriodOptions& options) {
  absl::flat_hash_map<uint32_t, bool> tested;
  std::vector<Segmentation> tried;
  for (const std::vector<uint32_t>& syms : anchor_sets) {
    for (size_t k = 0; k < syms.size(); ++k) {
      if (!tested.try_emplace(syms[k], true).second) continue;
      const uint32_t c = count[syms[k]];
      std::vector<size_t> cuts;
      cuts.reserve(c);
      for (size_t i = 0; i < t.size(); ++i) {
        if (t[i].symbol == syms[k]) cuts.push_back(i);
      }
      Segmentation s = Evaluate(t, std::move(cuts), symbols, options);
      s.anchor = syms[k];
      if (!Qualifies(s, options)) {
        // Only its numbers are needed (for the note): memory stays
        // O(tokens) however many anchors are tried.
        s.cuts = {};
        s.steady = {};
      }
      tried.push_back(std::move(s));
    }
  }
  return tried;
}

// How many of `backward_starts` (sorted) began in segment i, from its first
// token's start to the next segment's (the last: to the last token's end).
size_t BackwardStartsInSegment(const std::vector<SequenceToken>& t, const Segmentation& s, size_t i,
                               const std::vector<uint64_t>& backward_starts) {
  const uint64_t from = t[s.cuts[i]].start_ns;
  const uint64_t to = s.cuts[i + 1] < t.size() ? t[s.cuts[i + 1]].start_ns : t.back().end_ns;
  return CountInRange(backward_starts, from, to);
}

// The share of a segmentation's steady segments in which a backward pass
// began.
double SteadyShareWithBackward(const std::vector<SequenceToken>& t, const Segmentation& s,
                               const std::vector<uint64_t>& backward_starts) {
  size_t steady = 0, with = 0;
  for (size_t i = 0; i < s.segments(); ++i) {
    if (!s.steady[i]) continue;
    ++steady;
    with += BackwardStartsInSegment(t, s, i, backward_starts) > 0;
  }
  return steady == 0 ? 0 : static_cast<double>(with) / static_cast<double>(steady);
}

// The median count of backward starts in a segmentation's steady segments
// (`steady`) or in its others.
size_t BackwardStartsMedian(const std::vector<SequenceToken>& t, const Segmentation& s,
                            const std::vector<uint64_t>& backward_starts, bool steady) {
  std::vector<size_t> counts;
  for (size_t i = 0; i < s.segments(); ++i) {
    if (static_cast<bool>(s.steady[i]) == steady) counts.push_back(BackwardStartsInSegment(t, s, i, backward_starts));
  }
  return Median(std::move(counts));
}

// The update tokens (options.update_symbols) in a segmentation's
// representative steady segment.
size_t UpdateTokens(const std::vector<SequenceToken>& t, const Segmentation& s, const std::vector<bool>& update) {
  size_t n = 0;
  for (size_t i = s.cuts[s.representative]; i < s.cuts[s.representative] + s.unit; ++i) {
    n += t[i].symbol < update.size() && update[t[i].symbol];
  }
  return n;
}

// When a segmentation's first steady segment begins.
uint64_t FirstSteadyStart(const std::vector<SequenceToken>& t, const Segmentation& s) {
  for (size_t i = 0; i < s.segments(); ++i) {
    if (s.steady[i]) return t[s.cuts[i]].start_ns;
  }
  return t.back().end_ns;
}

// The share of the time from `from` to the last token's end spent in the
// segmentation's steady segments (the part of one that began before).
double SteadyTimeShareFrom(const std::vector<SequenceToken>& t, const Segmentation& s, uint64_t from) {
  if (t.back().end_ns <= from) return 0;
  uint64_t steady_ns = 0;
  for (size_t i = 0; i < s.segments(); ++i) {
    if (!s.steady[i]) continue;
    const size_t to = s.cuts[i + 1];
    const uint64_t begin = std::max(t[s.cuts[i]].start_ns, from);
    const uint64_t end = t[to < t.size() ? to : to - 1].start_ns;
    if (end > begin) steady_ns += end - begin;
  }
  return static_cast<double>(steady_ns) / static_cast<double>(t.back().end_ns - from);
}

// The winning segmentation among those tried (see the header's rule), or
// nullptr when none qualifies.
const Segmentation* ChooseSegmentation(const std::vector<SequenceToken>& t, const std::vector<Segmentation>& tried,
                                       size_t symbols, const PeriodOptions& options) {
  // Where the backward passes are known, a unit without them is no
  // training iteration beside one with them (an RL loop's environment
  // step, repeated for a rollout before the updates): only units with
  // them compete then.
  const std::vector<uint64_t>& backward = options.backward_starts;
  auto trains = [&](const Segmentation& s) { return SteadyShareWithBackward(t, s, backward) >= 0.5; };
  bool some_train = false;
  for (const Segmentation& s : tried) some_train |= !backward.empty() && Qualifies(s, options) && trains(s);
  auto competes = [&](const Segmentation& s) { return Qualifies(s, options) && (!some_train || trains(s)); };
  const Segmentation* chosen = nullptr;
  for (const Segmentation& s : tried) {
    if (!competes(s)) continue;
    if (chosen == nullptr || s.time_share > chosen->time_share) chosen = &s;
  }
  if (chosen == nullptr) return nullptr;
  // Near ties go to the one with more steady segments (a call every 2
  // iterations splits as well, into pairs), then to fewer segments (an
  // anchor that also occurs in evaluation batches splits them off too).
  // Two units are compared over the time from where both have begun to
  // repeat: a coarse unit (an epoch of iterations) counts the warm-up
  // iterations inside its first segment as steady, where the iterations'
  // own unit leaves them out as unlike the rest.
  const Segmentation* finest = chosen;
  for (const Segmentation& s : tried) {
    if (!competes(s)) continue;
    const uint64_t from = std::max(FirstSteadyStart(t, s), FirstSteadyStart(t, *chosen));
    if (SteadyTimeShareFrom(t, s, from) < SteadyTimeShareFrom(t, *chosen, from) - 0.03) continue;
    if (s.steady_count > finest->steady_count ||
        (s.steady_count == finest->steady_count && s.segments() < finest->segments())) {
      finest = &s;
    }
  }
  chosen = finest;
  // A finer unit whose irregular segments hold an iteration's worth of extra
  // work, and whose symbols make most of the coarse unit: the coarse unit
  // only absorbed a periodic extra (an evaluation pass).  A per-layer unit
  // of a model with identical layers lacks the backward pass's symbols.
  // Then the best of the finer units that make most of the coarse one.
  const Segmentation* finer = nullptr;
  bool absorbed = false;
  const size_t coarse_updates = UpdateTokens(t, *chosen, options.update_symbols);
  const size_t coarse_backward = backward.empty() ? 0 : BackwardStartsMedian(t, *chosen, backward, true);
  for (const Segmentation& s : tried) {
    if (!competes(s) || s.steady_count < 2 * chosen->steady_count) continue;
    std::vector<bool> in_fine(symbols, false);
    for (size_t i = s.cuts[s.representative]; i < s.cuts[s.representative] + s.unit; ++i) in_fine[t[i].symbol] = true;
    size_t covered = 0;
    const size_t from = chosen->cuts[chosen->representative];
    for (size_t i = from; i < from + chosen->unit; ++i) covered += in_fine[t[i].symbol];
    if (covered < 0.75 * chosen->unit) continue;
    // An absorbed evaluation adds no backward pass; an extra with more of
    // them than the steady unit is training (the update after micro-batches
    // or tasks: MAML's meta-update after its tasks' adaptation), and then
    // the finer unit is a part of the iteration.
    const size_t fine_backward = backward.empty() ? 0 : BackwardStartsMedian(t, s, backward, true);
    if (!backward.empty() && BackwardStartsMedian(t, s, backward, false) > fine_backward) continue;
    // Updates known by their kernels: a finer unit without one is a
    // micro-batch of the coarse unit's accumulation group; one with an
    // update, of which the coarse unit holds two or more (and as many
    // times its backward passes), is the iteration of an epoch.
    const size_t fine_updates = UpdateTokens(t, s, options.update_symbols);
    if (fine_updates == 0 && coarse_updates > 0) continue;
    const bool epoch_of_iterations = fine_updates > 0 && coarse_updates >= 2 * fine_updates && fine_backward > 0 &&
                                     coarse_backward >= 2 * fine_backward;
    absorbed |= MedianExtra(s) >= s.unit || epoch_of_iterations;
    if (finer == nullptr || s.time_share > finer->time_share) finer = &s;
  }
  return absorbed && finer != nullptr ? finer : chosen;
}

// How much the job waits at token i: its length where tokens are waits,
// else the gap before it.  A step starts at the heaviest.
int64_t WaitAt(const std::vector<SequenceToken>& t, size_t i, const PeriodOptions& options) {
  if (options.tokens_are_waits) return static_cast<int64_t>(t[i].end_ns - t[i].start_ns);
  return i == 0 ? 0 : static_cast<int64_t>(t[i].start_ns) - static_cast<int64_t>(t[i - 1].end_ns);
}

// Where in the cycle to cut: before the first of a run of preferred tokens
// (the input's copy, then the target's), the unit read as a cycle; else
// before the position with the largest median gap (or, with
// tokens_are_waits, the longest median token), over up to 101 steady
// segments spread over the trace.
size_t CutPosition(const std::vector<SequenceToken>& t, const Segmentation& chosen,
                   const std::vector<bool>& preferred_cut, const PeriodOptions& options, bool& cut_preferred) {
  const size_t rep = chosen.cuts[chosen.representative];
  const size_t unit = chosen.unit;
  auto preferred = [&](size_t j) {
    const uint32_t sym = t[rep + j].symbol;
    return sym < preferred_cut.size() && preferred_cut[sym];
  };
  for (size_t j = 0; j < unit; ++j) {
    if (preferred(j) && (unit == 1 || !preferred((j + unit - 1) % unit))) {
      cut_preferred = true;
      return j;
    }
  }
  std::vector<size_t> sample;
  for (size_t i = 0; i < chosen.segments(); ++i) {
    if (chosen.steady[i] && chosen.cuts[i + 1] - chosen.cuts[i] == unit && chosen.cuts[i] > 0) {
      sample.push_back(chosen.cuts[i]);
    }
  }
  if (sample.size() > 101) {
    std::vector<size_t> spread;
    for (size_t k = 0; k < 101; ++k) spread.push_back(sample[k * (sample.size() - 1) / 100]);
    sample = std::move(spread);
  }
  int64_t best_gap = INT64_MIN;
  size_t cut_pos = 0;
  std::vector<int64_t> gaps(sample.size());
  for (size_t j = 0; j < unit && !sample.empty(); ++j) {
    for (size_t k = 0; k < sample.size(); ++k) gaps[k] = WaitAt(t, sample[k] + j, options);
    if (const int64_t gap = Median(gaps); gap > best_gap) {
      best_gap = gap;
      cut_pos = j;
    }
  }
  return cut_pos;
}

// The cuts before each segment's cut symbol (its rank-th in the unit).  A
// segment without the cut symbol (a different iteration) gets no cut: it
// joins the window before it, which is then left out.  Where the cut symbol
// recurs in a unit of waits (a thread's read, blocked on several times an
// iteration, in a number that varies), the rank may land on another wait:
// where the one it lands on is less than half the segment's heaviest (the
// job's long wait), the segment is cut at the heaviest, as the cut position
// was chosen; near-equal waits keep the rank, which is stable.  Not in
// kernel sequences: there a stall mid-iteration would move the cut.
// Before the first anchor and after the last one, the same number of cut
// symbols as in a unit away: the first iteration (the anchor may come late
// in it) and the last one (it may lack the anchor: a smaller batch).
std::vector<size_t> CycleCuts(const std::vector<SequenceToken>& t, const Segmentation& chosen, size_t cut_pos,
                              bool cut_preferred, const PeriodOptions& options) {
  const size_t n = t.size();
  const size_t rep = chosen.cuts[chosen.representative];
  const uint32_t cut_symbol = t[rep + cut_pos].symbol;
  size_t rank = 0;  // earlier occurrences of the cut symbol in the unit
  for (size_t j = 0; j < cut_pos; ++j) rank += t[rep + j].symbol == cut_symbol;
  size_t per_unit = 0;
  for (size_t j = 0; j < chosen.unit; ++j) per_unit += t[rep + j].symbol == cut_symbol;
  const bool recurring_wait = options.tokens_are_waits && per_unit > 1 && !cut_preferred;
  std::vector<size_t> cuts;
  for (size_t a = 0; a < chosen.cuts.size(); ++a) {
    const size_t from = chosen.cuts[a];
    const size_t to = a + 1 < chosen.cuts.size() ? chosen.cuts[a + 1] : n;
    size_t cut = n;
    if (from + cut_pos < to && t[from + cut_pos].symbol == cut_symbol) {
      cut = from + cut_pos;
    } else {
      size_t seen = 0;
      for (size_t i = from; i < to; ++i) {
        if (t[i].symbol == cut_symbol && seen++ == rank) {
          cut = i;
          break;
        }
      }
    }
    if (recurring_wait) {
      size_t heaviest = n;
      for (size_t i = from; i < to; ++i) {
        if (t[i].symbol == cut_symbol && (heaviest == n || WaitAt(t, i, options) > WaitAt(t, heaviest, options))) {
          heaviest = i;
        }
      }
      if (heaviest < n && (cut == n || 2 * WaitAt(t, cut, options) < WaitAt(t, heaviest, options))) cut = heaviest;
    }
    if (cut < n && (cuts.empty() || cut > cuts.back())) cuts.push_back(cut);
  }
  if (cuts.empty()) return cuts;
  size_t seen = 0;
  for (size_t i = cuts.front(); i-- > 0;) {
    if (t[i].symbol == cut_symbol && ++seen == per_unit) {
      cuts.insert(cuts.begin(), i);
      break;
    }
  }
  seen = 0;
  for (size_t i = cuts.back() + 1; i < n; ++i) {
    if (t[i].symbol == cut_symbol && ++seen == per_unit) {
      cuts.push_back(i);
      break;
    }
  }
  return cuts;
}

// Steady iterations at the end of a leading irregular segment cut off it.
// The first cut goes back from the first anchor by as many cut tokens as
// the steady unit holds; where the first iteration holds fewer (one wait
// less), that cut lands in the start-up, and the first iteration was
// counted with it as one warm-up step.  Only before the first steady
// segment: an irregular segment between steady ones is an iteration with
// extra work, and after the last cut nothing ends an iteration.
Segmentation PeelSteadyIterations(const std::vector<SequenceToken>& t, Segmentation fin, size_t symbols,
                                  const PeriodOptions& options) {
  size_t first_steady = 0;
  while (first_steady < fin.segments() && !fin.steady[first_steady]) ++first_steady;
  if (first_steady == 0 || first_steady == fin.segments()) return fin;
  const size_t rep = fin.cuts[fin.representative];
  const uint32_t cut_symbol = t[rep].symbol;
  UnitShape shape(t, rep, fin.unit, symbols, options);
  // The length (the unit's, else within the tolerance) of an iteration like
  // the steady one that ends at `to`, starts with the cut token and leaves
  // some of [from, to) before it; 0: none.
  auto steady_tail = [&](size_t from, size_t to) -> size_t {
    for (size_t d = 0; d <= shape.tolerance(); ++d) {
      for (size_t len : {fin.unit + d, fin.unit - std::min(d, fin.unit)}) {
        if (len > 0 && len < to - from && t[to - len].symbol == cut_symbol && shape.Like(to - len, to)) return len;
      }
    }
    return 0;
  };
  std::vector<size_t> cuts;
  for (size_t i = 0; i < first_steady; ++i) {
    const size_t from = fin.cuts[i];
    std::vector<size_t> peeled;
    for (size_t end = fin.cuts[i + 1], len; (len = steady_tail(from, end)) > 0; end -= len) {
      peeled.push_back(end - len);
    }
    cuts.push_back(from);
    cuts.insert(cuts.end(), peeled.rbegin(), peeled.rend());
  }
  if (cuts.size() == first_steady) return fin;
  cuts.insert(cuts.end(), fin.cuts.begin() + first_steady, fin.cuts.end());
  return Evaluate(t, std::move(cuts), symbols, options);
}

// Why an irregular iteration is left out, by where it lies.
std::string LeftOutReason(size_t i, size_t first_steady, size_t last_steady, size_t tokens, size_t unit) {
  const std::string size = absl::StrFormat("%d tokens, the steady iteration has %d", tokens, unit);
  if (i < first_steady) {
    return absl::StrCat("warm-up: differs from the steady iteration (", size,
                        "; autotuning, compilation, allocator growth)");
  }
  if (i > last_steady) {
    return absl::StrCat("end of the run: differs from the steady iteration (", size, "; a smaller last batch?)");
  }
  if (tokens > unit) {
    return absl::StrCat(kIrregularWorkReason, " (", size, "; an evaluation pass, checkpoint or epoch boundary?)");
  }
  return absl::StrCat("less work than the steady iteration (", size, "; an evaluation batch, forward only?)");
}

// The iterations of the final segmentation, each compared with the steady
// one again.
void FillIterations(const std::vector<SequenceToken>& t, const Segmentation& fin, const PeriodOptions& options,
                    PeriodResult& r) {
  r.found = true;
  r.unit_tokens = fin.unit;
  r.steady = fin.steady_count;
  r.token_share = fin.token_share;
  r.time_share = fin.time_share;
  r.tokens_before = fin.cuts.front();
  r.tokens_after = t.size() - fin.cuts.back();
  size_t first_steady = fin.segments(), last_steady = 0;
  for (size_t i = 0; i < fin.segments(); ++i) {
    if (!fin.steady[i]) continue;
    first_steady = std::min(first_steady, i);
    last_steady = i;
  }
  std::vector<uint64_t> steady_ns;
  for (size_t i = 0; i < fin.segments(); ++i) {
    if (fin.steady[i]) {
      steady_ns.push_back(Boundary(t, fin.cuts[i + 1], options.tokens_are_waits) -
                          Boundary(t, fin.cuts[i], options.tokens_are_waits));
    }
  }
  const uint64_t steady_median_ns = steady_ns.empty() ? 0 : Median(steady_ns);
  for (size_t i = 0; i < fin.segments(); ++i) {
    Iteration it;
    it.first_token = fin.cuts[i];
    it.tokens = fin.cuts[i + 1] - fin.cuts[i];
    it.start_ns = Boundary(t, fin.cuts[i], options.tokens_are_waits);
    it.end_ns = Boundary(t, fin.cuts[i + 1], options.tokens_are_waits);
    const bool fewer_waits_not_less_time = options.tokens_are_waits && i > first_steady && i < last_steady &&
                                           it.tokens < fin.unit && it.end_ns - it.start_ns >= steady_median_ns;
    if (!fin.steady[i] && !fewer_waits_not_less_time) {
      it.warmup = i < first_steady;
      it.left_out = LeftOutReason(i, first_steady, last_steady, it.tokens, fin.unit);
    }
    r.iterations.push_back(std::move(it));
  }
}

}  // namespace

PeriodResult FindRepeatingSequence(const std::vector<SequenceToken>& t, const std::vector<bool>& preferred_cut,
                                   const PeriodOptions& options) {
  PeriodResult r;
  const size_t n = t.size();
  if (n < 2 * static_cast<size_t>(options.min_iterations)) {
    r.why_not = absl::StrFormat("%d tokens are too few to repeat %d times", n, options.min_iterations);
    return r;
  }
  size_t symbols = 0;
  for (const SequenceToken& k : t) symbols = std::max<size_t>(symbols, k.symbol + 1);
  std::vector<uint32_t> count(symbols, 0);
  std::vector<uint32_t> order;  // symbols by first occurrence
  for (const SequenceToken& k : t) {
    if (count[k.symbol]++ == 0) order.push_back(k.symbol);
  }
  const std::vector<Segmentation> tried = TryAnchors(t, AnchorSets(count, order, options), count, symbols, options);
  r.anchors_tested = tried.size();
  const Segmentation* chosen = ChooseSegmentation(t, tried, symbols, options);
  if (chosen == nullptr) {
    const Segmentation* closest = nullptr;
    for (const Segmentation& s : tried) {
      if (closest == nullptr || s.time_share > closest->time_share) closest = &s;
    }
    r.why_not = closest == nullptr
                    ? absl::StrFormat("no symbol of %d recurs %d times or more", symbols, options.min_iterations)
                    : absl::StrFormat("no repeating unit: of %d anchors tried the best split %s", tried.size(),
                                      Describe(*closest, options));
    return r;
  }
  r.anchor_symbol = chosen->anchor;
  const size_t cut_pos = CutPosition(t, *chosen, preferred_cut, options, r.cut_preferred);
  r.cut_symbol = t[chosen->cuts[chosen->representative] + cut_pos].symbol;
  Segmentation fin =
      PeelSteadyIterations(t, Evaluate(t, CycleCuts(t, *chosen, cut_pos, r.cut_preferred, options), symbols, options),
                           symbols, options);
  if (fin.segments() == 0 || fin.steady_count < options.min_iterations) {
    r.why_not = absl::StrFormat("the repeating unit found (%d tokens) did not survive the cut", chosen->unit);
    return r;
  }
  FillIterations(t, fin, options, r);
  return r;
}

}  // namespace gpuos
