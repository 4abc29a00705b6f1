// Regularity of intervals; see interval_regularity.h.
#include "interval_regularity.h"

#include <algorithm>
#include <cmath>

namespace gpuos_capture {

IntervalRegularity MeasureIntervals(std::vector<uint64_t> intervals, double excused_fraction) {
  IntervalRegularity r;
  r.intervals = intervals.size();
  if (intervals.empty()) return r;
  std::sort(intervals.begin(), intervals.end());
  const double fraction = std::clamp(excused_fraction, 0.0, 0.5);
  r.excused = static_cast<uint64_t>(std::floor(fraction * static_cast<double>(intervals.size())));
  intervals.resize(intervals.size() - r.excused);
  double sum = 0;
  for (uint64_t v : intervals) sum += static_cast<double>(v);
  r.mean_ns = sum / static_cast<double>(intervals.size());
  double squares = 0;
  for (uint64_t v : intervals) {
    const double d = static_cast<double>(v) - r.mean_ns;
    squares += d * d;
  }
  const double stddev = std::sqrt(squares / static_cast<double>(intervals.size()));
  r.cv = r.mean_ns > 0 ? stddev / r.mean_ns : INFINITY;
  return r;
}

}  // namespace gpuos_capture
