// The union of a list of time intervals, for activity that overlaps itself
// (queued block I/O requests, a script's own data range around the hook's).
#pragma once

#include <algorithm>
#include <vector>

namespace gpuos {

// Sorts `intervals` (any type with start_ns and end_ns) by start and
// replaces those that overlap or touch by one spanning them; the other
// members are the first one's.
template <typename T>
void UniteOverlapping(std::vector<T>& intervals) {
  std::sort(intervals.begin(), intervals.end(), [](const T& a, const T& b) { return a.start_ns < b.start_ns; });
  std::vector<T> merged;
  merged.reserve(intervals.size());
  for (const T& iv : intervals) {
    if (!merged.empty() && iv.start_ns <= merged.back().end_ns) {
      merged.back().end_ns = std::max(merged.back().end_ns, iv.end_ns);
    } else {
      merged.push_back(iv);
    }
  }
  intervals = std::move(merged);
}

}  // namespace gpuos
