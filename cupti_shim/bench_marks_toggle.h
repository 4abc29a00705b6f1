// A benchmark knob: GPUOS_BENCH_MARKS_TOGGLE=PERIOD_MS:LOG in a traced
// process switches the shim's NVTX and Python-hook marks off and on every
// PERIOD_MS, counted from the process's first mark, and writes "on NS" /
// "off NS" (CLOCK_MONOTONIC) to LOG at each flip.  While off, a mark costs
// what it costs in a prepared, detached process: the caller's own frames
// and an early return.  So a job's step rate in its "on" and "off" spans
// of one run gives what recording its marks costs it (bench/phase_overhead.py
// --marks-toggle-ms), the way GPUOS_BENCH_TOGGLE does for the OS side.
// GPUOS_BENCH_MARKS_TOGGLE_DRY=1 logs the flips but keeps the marks on:
// the benchmark's control.  Not for traces anyone reads: the marks of the "off" spans are missing.
#pragma once

#include <cstdint>

namespace gpuos_shim {

// Whether marks are switched off at `now_ns`; false, after a static's
// guard check, when the knob is unset.  The first call reads the
// environment.  Only the start of a range is gated: one begun "on" and
// ended "off" is recorded (the benchmark's margins leave those edges out).
bool BenchMarksPaused(uint64_t now_ns);

}  // namespace gpuos_shim
