// Steps from the rhythm of CUDA API calls, live; see live_step_rhythm.h.
#include "live_step_rhythm.h"

#include <algorithm>

#include "interval_regularity.h"

namespace gpuos_capture {

bool LiveStepRhythm::RegularEvery(const Series& s, uint32_t k, std::vector<uint64_t>* anchors) const {
  const size_t n = LearningCalls(k);
  if (s.ends.size() < n) return false;
  const size_t first = s.ends.size() - n;
  // The phase whose calls end the longest gaps on average; the last call
  // must be one of them, so that a step begins where the count starts.
  // Means, not sums: phase 0 has one gap fewer inside the window.
  std::vector<double> gap_sum(k, 0);
  std::vector<uint32_t> gaps(k, 0);
  for (size_t i = first + 1; i < s.ends.size(); ++i) {
    gap_sum[(i - first) % k] += static_cast<double>(s.ends[i] - s.ends[i - 1]);
    ++gaps[(i - first) % k];
  }
  uint32_t phase = 0;
  for (uint32_t p = 1; p < k; ++p) {
    if (gap_sum[p] / gaps[p] > gap_sum[phase] / gaps[phase]) phase = p;
  }
  if ((s.ends.size() - 1 - first) % k != phase) return false;
  anchors->clear();
  for (size_t i = first + phase; i < s.ends.size(); i += k) {
    // In every step the anchor ends the longest gap: calls that merely sum
    // to a regular k-th (random ones do) have no such structure.
    if (k > 1 && i >= first + k) {
      const uint64_t anchor_gap = s.ends[i] - s.ends[i - 1];
      for (size_t j = i - k + 1; j < i; ++j) {
        if (s.ends[j] - s.ends[j - 1] > anchor_gap) return false;
      }
    }
    anchors->push_back(s.ends[i]);
  }
  if (anchors->size() < static_cast<size_t>(options_.min_steps) + 1) return false;
  std::vector<uint64_t> intervals;
  for (size_t i = 1; i < anchors->size(); ++i) {
    if ((*anchors)[i] < (*anchors)[i - 1]) return false;
    intervals.push_back((*anchors)[i] - (*anchors)[i - 1]);
  }
  const IntervalRegularity r = MeasureIntervals(std::move(intervals), options_.excused_fraction);
  return r.mean_ns >= static_cast<double>(options_.min_interval_ns) && r.cv <= options_.max_cv;
}

bool LiveStepRhythm::BunchedCalls(const Series& s) const {
  const size_t n = std::min(s.ends.size(), LearningCalls(1));
  std::vector<uint64_t> intervals;
  for (size_t i = s.ends.size() - n + 1; i < s.ends.size(); ++i) {
    intervals.push_back(s.ends[i] - s.ends[i - 1]);
  }
  if (intervals.empty()) return false;
  return !(MeasureIntervals(std::move(intervals), options_.excused_fraction).cv <= options_.max_cv);
}

LiveStepRhythm::Outcome LiveStepRhythm::Add(uint32_t tid, uint32_t call, uint64_t end_ns) {
  Outcome out;
  if (found_) {
    if (tid != anchor_tid_ || call != anchor_call_) return out;
    if (++calls_since_anchor_ < calls_per_step_) return out;
    calls_since_anchor_ = 0;
    out.kind = Outcome::kStepEnd;
    out.step = ++step_;
    return out;
  }
  Series* s = nullptr;
  for (Series& candidate : series_) {
    if (candidate.tid == tid && candidate.call == call) s = &candidate;
  }
  if (s == nullptr) {
    if (series_.size() < options_.max_series) {
      series_.push_back(Series{tid, call, {}});
      s = &series_.back();
    } else {
      // Full (start-up's many threads and calls): the series quiet the
      // longest gives way, so that the loop's call is learned once it runs.
      s = &series_.front();
      for (Series& candidate : series_) {
        if (candidate.ends.back() < s->ends.back()) s = &candidate;
      }
      *s = Series{tid, call, {}};
    }
  }
  s->ends.push_back(end_ns);
  const size_t keep = LearningCalls(options_.max_calls_per_step);
  if (s->ends.size() > 2 * keep) s->ends.erase(s->ends.begin(), s->ends.end() - keep);
  // Nothing to judge yet, or calls too dense for any k (their mean spacing
  // under min_interval_ns / max_calls_per_step): skipped without a sort or
  // an allocation, since such a call may come thousands of times a second.
  const size_t first_window = LearningCalls(1);
  if (s->ends.size() < first_window) return out;
  const uint64_t span = s->ends.back() - s->ends[s->ends.size() - first_window];
  if (span * options_.max_calls_per_step < options_.min_interval_ns * (first_window - 1)) return out;
  std::vector<uint64_t> anchors;
  uint32_t k = 1;
  bool regular = RegularEvery(*s, k, &anchors);
  // k > 1 only where single calls bunch up (irregular one by one): calls
  // that are regular but too close together are sub-step work, whatever
  // every k-th of them does.
  if (!regular && BunchedCalls(*s)) {
    while (!regular && k < options_.max_calls_per_step) regular = RegularEvery(*s, ++k, &anchors);
  }
  if (!regular) return out;
  found_ = true;
  anchor_tid_ = tid;
  anchor_call_ = call;
  calls_per_step_ = k;
  calls_since_anchor_ = 0;
  step_ = static_cast<int64_t>(anchors.size()) - 1;
  std::vector<Series>().swap(series_);
  out.kind = Outcome::kFound;
  out.ends = std::move(anchors);
  out.step = step_;
  return out;
}

}  // namespace gpuos_capture
