// How regular a series of intervals is: the statistics behind "a call that
// recurs once a step" (agent/analysis/api_rhythm.h, after the fact) and the
// shim's live count of steps from the same calls (live_step_rhythm.h).  One
// rule for both, so that the steps the shim counts while the job runs are
// the steps the report finds in the trace.  Plain C++: the shim links
// nothing else.
#pragma once

#include <cstdint>
#include <vector>

namespace gpuos_capture {

struct IntervalRegularity {
  uint64_t intervals = 0;  // all of them
  uint64_t excused = 0;    // the longest ones set aside as pauses
  double mean_ns = 0;      // over the kept ones
  double cv = 0;           // population standard deviation / mean, kept ones; +inf for a zero mean
};

// The longest floor(excused_fraction * n) intervals (the fraction clamped
// to [0, 0.5]) are set aside as pauses (an evaluation pass, a checkpoint, a
// stall), never the shortest: a call that comes twice in some steps makes
// short intervals, which must count against it.  Empty input: all zeros.
IntervalRegularity MeasureIntervals(std::vector<uint64_t> intervals, double excused_fraction);

}  // namespace gpuos_capture
