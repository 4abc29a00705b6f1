// How many of a sorted list of times fall in [from, to): backward passes
// in a step, engine calls in a segment.  O(log n).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuos {

inline size_t CountInRange(const std::vector<uint64_t>& sorted, uint64_t from, uint64_t to) {
  if (to <= from) return 0;
  auto first = std::lower_bound(sorted.begin(), sorted.end(), from);
  return static_cast<size_t>(std::lower_bound(first, sorted.end(), to) - first);
}

}  // namespace gpuos
