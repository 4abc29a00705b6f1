// See flight_control.h.
#include "record/flight_control.h"

#include <signal.h>

#include "absl/strings/str_format.h"

namespace gpuos {

std::string FlightDumpReason(const signalfd_siginfo& info) {
  if (info.ssi_code == SI_QUEUE && info.ssi_int == kCtlDumpValue) {
    return absl::StrFormat("gpuos-trace ctl dump (pid %u)", info.ssi_pid);
  }
  return absl::StrFormat("SIGUSR1 from pid %u", info.ssi_pid);
}

}  // namespace gpuos
