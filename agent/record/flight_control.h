// How a running flight recorder is told to write its window out: SIGUSR1 to
// gpuos-trace.  `gpuos-trace ctl --pid PID dump` sends it with sigqueue(3)
// and kCtlDumpValue, so that the dump can say who asked.
#pragma once

#include <sys/signalfd.h>

#include <string>

namespace gpuos {

inline constexpr int kCtlDumpValue = 0x67647570;  // "gdup"

// "gpuos-trace ctl dump (pid 123)" or "SIGUSR1 from pid 123".
std::string FlightDumpReason(const signalfd_siginfo& info);

}  // namespace gpuos
