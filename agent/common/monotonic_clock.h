// CLOCK_MONOTONIC in nanoseconds: the one clock of every timestamp in the
// event stream (proto/gpuos_trace.proto), so OS and GPU events join.
#pragma once

#include <time.h>

#include <cstdint>

namespace gpuos {

inline uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace gpuos
