// Facts about this machine and moment that every trace header carries, so a
// trace can be read anywhere: host, kernel, clocks, syscall names.
#pragma once

#include "gpuos_trace.pb.h"

namespace gpuos {

// CLOCK_MONOTONIC and CLOCK_REALTIME read back to back (the pair with the
// narrowest gap of a few tries, so the offset between them is tight).
v1::ClockPair ReadClockPair();
uint64_t MonotonicNowNs();

// Fills host, kernel, arch, page size, online CPUs, syscall names and the
// start clocks.
void FillHostInfo(v1::TraceHeader* header);

}  // namespace gpuos
