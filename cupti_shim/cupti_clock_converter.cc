// Piecewise-linear mapping of another clock onto CLOCK_MONOTONIC (see the
// header).
#include "cupti_clock_converter.h"

#include <algorithm>
#include <cmath>

namespace gpuos_shim {

ClockConverter::ClockConverter(double nominal_ns_per_tick, uint64_t min_spacing_ns,
                               size_t max_readings)
    : nominal_ns_per_tick_(nominal_ns_per_tick > 0 ? nominal_ns_per_tick : 1.0),
      min_spacing_ns_(min_spacing_ns),
      max_readings_(std::max<size_t>(max_readings, 2)) {}

bool ClockConverter::AddReading(uint64_t source, uint64_t monotonic) {
  if (!readings_.empty()) {
    const Reading& last = readings_.back();
    if (source <= last.source || monotonic <= last.monotonic) return false;
    // Too close to the last one to give a slope worth having: the newer
    // reading replaces it, unless that would leave only one reading, which
    // a first segment of any length beats.
    if (readings_.size() >= 2 && monotonic - readings_[readings_.size() - 2].monotonic <
                                     min_spacing_ns_) {
      readings_.back() = {source, monotonic};
      return true;
    }
  }
  readings_.push_back({source, monotonic});
  if (readings_.size() > max_readings_) readings_.pop_front();
  return true;
}

double ClockConverter::Slope(size_t segment) const {
  const Reading& a = readings_[segment];
  const Reading& b = readings_[segment + 1];
  return static_cast<double>(b.monotonic - a.monotonic) / static_cast<double>(b.source - a.source);
}

double ClockConverter::current_slope() const {
  return readings_.size() < 2 ? nominal_ns_per_tick_ : Slope(readings_.size() - 2);
}

uint64_t ClockConverter::Along(const Reading& from, double slope, uint64_t source) {
  // Signed distance in ticks; doubles keep ~15 significant digits, plenty
  // for the seconds between readings.
  const double ticks = source >= from.source ? static_cast<double>(source - from.source)
                                             : -static_cast<double>(from.source - source);
  const long long ns = std::llround(ticks * slope);
  if (ns < 0 && static_cast<uint64_t>(-ns) >= from.monotonic) return 1;  // never 0: "none"

  return ns < 0 ? from.monotonic - static_cast<uint64_t>(-ns)
                : from.monotonic + static_cast<uint64_t>(ns);
}

uint64_t ClockConverter::ToMonotonic(uint64_t source) const {
  if (source == 0) return 0;
  if (readings_.empty()) return source;
  if (readings_.size() == 1) return Along(readings_.front(), nominal_ns_per_tick_, source);
  if (source <= readings_.front().source) return Along(readings_.front(), Slope(0), source);
  // The last reading at or before `source`.
  auto after = std::upper_bound(
      readings_.begin(), readings_.end(), source,
      [](uint64_t value, const Reading& reading) { return value < reading.source; });
  size_t segment = static_cast<size_t>(after - readings_.begin()) - 1;
  if (segment + 1 >= readings_.size()) segment = readings_.size() - 2;  // past the last
  return Along(readings_[segment], Slope(segment), source);
}

}  // namespace gpuos_shim
