// Segments compared with the steady iteration; see sequence_segmentation.h.
#include "analysis/sequence_segmentation.h"

#include "absl/container/flat_hash_map.h"

namespace gpuos {

uint64_t SegmentHash(const std::vector<SequenceToken>& t, size_t from, size_t to) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = from; i < to; ++i) {
    h ^= t[i].symbol + 1ull;
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h ^ (to - from) * 0x9e3779b97f4a7c15ull;
}

Segmentation Evaluate(const std::vector<SequenceToken>& t, std::vector<size_t> cuts, size_t symbols,
                      const PeriodOptions& options) {
  Segmentation s;
  s.cuts = std::move(cuts);
  s.segment_count = s.cuts.size() < 2 ? 0 : s.cuts.size() - 1;
  const size_t n = s.segments();
  if (n == 0) return s;
  std::vector<uint64_t> hashes(n);
  absl::flat_hash_map<uint64_t, std::pair<size_t, size_t>> freq;  // hash -> (count, first segment)
  for (size_t i = 0; i < n; ++i) {
    hashes[i] = SegmentHash(t, s.cuts[i], s.cuts[i + 1]);
    auto [it, inserted] = freq.try_emplace(hashes[i], 0, i);
    ++it->second.first;
  }
  uint64_t dominant = 0;
  size_t best = 0, best_first = 0;
  for (const auto& [h, cf] : freq) {
    if (cf.first > best || (cf.first == best && cf.second < best_first)) {
      best = cf.first;
      best_first = cf.second;
      dominant = h;
    }
  }
  s.representative = best_first;
  s.unit = s.cuts[best_first + 1] - s.cuts[best_first];
  UnitShape shape(t, s.cuts[best_first], s.unit, symbols, options);
  s.steady.assign(n, 0);
  std::vector<uint64_t> durations;
  for (size_t i = 0; i < n; ++i) {
    const size_t from = s.cuts[i], to = s.cuts[i + 1], len = to - from;
    if (!shape.Like(from, to, hashes[i])) continue;
    s.steady[i] = 1;
    ++s.steady_count;
    s.steady_tokens += len;
    durations.push_back(t[to < t.size() ? to : to - 1].start_ns - t[from].start_ns);
    s.time_share += static_cast<double>(durations.back());
  }
  size_t first = n, last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!s.steady[i]) continue;
    first = std::min(first, i);
    last = i;
  }
  if (first < n) {
    s.region_token_share = static_cast<double>(s.steady_tokens) / (s.cuts[last + 1] - s.cuts[first]);
    const uint64_t region = t[s.cuts[last + 1]].start_ns - t[s.cuts[first]].start_ns;
    s.region_time_share = region > 0 ? s.time_share / static_cast<double>(region) : 0;
  }
  const uint64_t span = t.back().end_ns > t.front().start_ns ? t.back().end_ns - t.front().start_ns : 1;
  s.time_share /= static_cast<double>(span);
  if (!durations.empty()) {
    std::sort(durations.begin(), durations.end());
    s.median_ns = durations[durations.size() / 2];
    const size_t kept = durations.size() - durations.size() / 10;
    double sum = 0, squares = 0;
    for (size_t i = 0; i < kept; ++i) sum += static_cast<double>(durations[i]);
    const double mean = sum / kept;
    for (size_t i = 0; i < kept; ++i) squares += (durations[i] - mean) * (durations[i] - mean);
    s.duration_cv = mean > 0 ? std::sqrt(squares / kept) / mean : 0;
  }
  s.token_share = static_cast<double>(s.steady_tokens) / t.size();
  s.segment_share = static_cast<double>(s.steady_count) / n;
  return s;
}
}  // namespace gpuos
