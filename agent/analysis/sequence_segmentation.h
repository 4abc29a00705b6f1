// Segments of a token sequence compared with its steady iteration: the
// pieces FindRepeatingSequence (repeating_sequence.h) splits, scores and
// cuts again.  Internal to the analysis.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "analysis/repeating_sequence.h"

namespace gpuos {

// How the segments between consecutive cuts compare with the steady one.
struct Segmentation {
  std::vector<size_t> cuts;  // token indices; segment i is [cuts[i], cuts[i+1])
  std::vector<uint8_t> steady;
  size_t steady_count = 0;
  size_t steady_tokens = 0;
  size_t unit = 0;            // tokens of the steady segment
  size_t representative = 0;  // a segment with the steady sequence exactly
  uint64_t median_ns = 0;     // of steady segments, first token to first token
  double duration_cv = 0;     // of steady segments' durations, the longest 10% set aside
  double token_share = 0;        // of all tokens, in steady segments
  double region_token_share = 0;  // of the tokens from the first steady segment to the last
  double time_share = 0;          // of the trace's span, in steady segments
  double region_time_share = 0;   // of the time from the first steady segment to the last
  double segment_share = 0;
  size_t segment_count = 0;
  size_t segments() const { return segment_count; }
  uint32_t anchor = 0;
};

// A hash of the symbols of t[from, to).
uint64_t SegmentHash(const std::vector<SequenceToken>& t, size_t from, size_t to);

// The steady iteration's sequence, and whether a stretch of tokens is
// like it: the same sequence, or the same length and symbol counts within
// the tolerance (an occasional extra memset).
class UnitShape {
 public:
  UnitShape(const std::vector<SequenceToken>& t, size_t from, size_t unit, size_t symbols,
            const PeriodOptions& options)
      : t_(t),
        unit_(unit),
        hash_(SegmentHash(t, from, from + unit)),
        tol_(std::max<size_t>(2, static_cast<size_t>(std::ceil(options.tolerance * unit)))),
        hist_(symbols, 0) {
    for (size_t i = from; i < from + unit; ++i) ++hist_[t[i].symbol];
  }
  size_t tolerance() const { return tol_; }

  // `hash`: SegmentHash(t, from, to), where the caller has it.
  bool Like(size_t from, size_t to, uint64_t hash) {
    if (hash == hash_) return true;
    const size_t len = to - from;
    if ((len > unit_ ? len - unit_ : unit_ - len) > tol_) return false;
    int64_t distance = static_cast<int64_t>(unit_);
    for (size_t k = from; k < to; ++k) distance += hist_[t_[k].symbol]-- > 0 ? -1 : 1;
    for (size_t k = from; k < to; ++k) ++hist_[t_[k].symbol];
    return distance <= static_cast<int64_t>(tol_);
  }
  bool Like(size_t from, size_t to) { return Like(from, to, SegmentHash(t_, from, to)); }

 private:
  const std::vector<SequenceToken>& t_;
  size_t unit_;
  uint64_t hash_;
  size_t tol_;
  std::vector<int32_t> hist_;
};

// The segments between consecutive `cuts`, each compared with the most
// frequent one (the steady iteration), and the shares the choice is made on.
Segmentation Evaluate(const std::vector<SequenceToken>& t, std::vector<size_t> cuts, size_t symbols,
                      const PeriodOptions& options);

}  // namespace gpuos
