// How fast this CPU runs right now, for benchmarks on a shared host: the
// C++ twin of bench/cpu_pace.py (which says why).  A fixed chain of integer
// work that no tracer touches (no syscall, no CUDA call), timed; a timed
// chunk of the workload divided by the pace next to it is in units of this
// CPU's speed at that moment.
#ifndef GPUOS_BENCH_CPU_PACE_H
#define GPUOS_BENCH_CPU_PACE_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

// Seconds this CPU takes for `iterations` steps of a dependent multiply-add
// chain (about 1 ns a step on the GPU machine's host).
inline double PaceSeconds(uint64_t iterations) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t x = 1;
  for (uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ULL + i;
    asm volatile("" : "+r"(x));  // keeps the chain: no closed form, no vectors
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

#endif  // GPUOS_BENCH_CPU_PACE_H
