// Maps timestamps of another clock onto CLOCK_MONOTONIC ns, through pairs
// of readings of both taken while collection runs.
//
// Why: every event in a .gpuos file is CLOCK_MONOTONIC.  CUPTI can be told
// to stamp records with a clock of ours (a timestamp callback), which is the
// default; where that callback cannot be used, records come on CUPTI's own
// clock and must be mapped afterwards, on the parser thread
// (cupti_timestamps.h).  The class is pure arithmetic on any pair of clocks.
//
// The mapping is piecewise linear between readings, and extrapolated past
// the first and last with the nearest segment's slope (the nominal slope
// until there are two readings).  It is strictly increasing whenever the
// slopes are positive, so the order of any two records is kept: a kernel
// never moves before the API call that launched it.
//
// Not thread-safe: the caller serializes AddReading and ToMonotonic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace gpuos_shim {

class ClockConverter {
 public:
  // `nominal_ns_per_tick`: the slope used while only one reading exists
  // (1.0 for a clock that counts ns).  `min_spacing_ns`: a reading closer
  // than this to the last one replaces it (a short segment's slope is all
  // reading error).  `max_readings`: the oldest go first.
  explicit ClockConverter(double nominal_ns_per_tick = 1.0, uint64_t min_spacing_ns = 50'000'000,
                          size_t max_readings = 512);

  // One paired reading: `source` on the other clock, `monotonic` (ns) at
  // the same moment (the midpoint of a CLOCK_MONOTONIC read before and
  // after).  Readings must come in increasing order of both clocks; one
  // that does not is ignored, and false is returned.
  bool AddReading(uint64_t source, uint64_t monotonic);

  // CLOCK_MONOTONIC ns for a timestamp of the other clock; 0 stays 0 (CUPTI
  // uses 0 for "no timestamp").  With no reading at all, the input is
  // returned unchanged.
  uint64_t ToMonotonic(uint64_t source) const;

  size_t readings() const { return readings_.size(); }
  // ns per tick of the newest segment (the nominal slope with one reading).
  double current_slope() const;

 private:
  struct Reading {
    uint64_t source;
    uint64_t monotonic;
  };
  static uint64_t Along(const Reading& from, double slope, uint64_t source);
  double Slope(size_t segment) const;  // between readings_[segment] and [segment + 1]

  double nominal_ns_per_tick_;
  uint64_t min_spacing_ns_;
  size_t max_readings_;
  std::deque<Reading> readings_;
};

}  // namespace gpuos_shim
