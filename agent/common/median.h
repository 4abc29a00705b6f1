// The median of a list of numbers (the upper one of an even count), for
// the robust estimates of analysis and clock alignment; 0 when empty.
#pragma once

#include <algorithm>
#include <vector>

namespace gpuos {

template <typename T>
T Median(std::vector<T> values) {
  if (values.empty()) return T{};
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace gpuos
