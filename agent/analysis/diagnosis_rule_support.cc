// Shared pieces of the diagnosis rules; see diagnosis_rule_support.h.
#include "analysis/diagnosis_rule_support.h"

#include "absl/strings/str_format.h"

namespace gpuos::rule_support {

double Share(uint64_t part, uint64_t whole) { return whole ? static_cast<double>(part) / whole : 0.0; }

std::string Pct(double share) { return absl::StrFormat("%.1f%%", share * 100); }

std::string GainText(const Finding& f) {
  if (!f.gain) return absl::StrFormat(" Expected gain: %s.", f.gain_model);
  return absl::StrFormat(" Expected gain: the mean step %s shorter (model: %s).", Pct(*f.gain), f.gain_model);
}

void AppendGain(Finding& f) { f.evidence += GainText(f); }

std::string HostWorkText() {
  return absl::StrFormat("ran its own code with no CUDA call for more than %.1f ms at a time before copying data to "
                         "the GPU",
                         kHostWorkGapNs / 1e6);
}

uint64_t CpuSideIdle(const DiagnosisInputs& in) {
  uint64_t sum = 0;
  for (IdleCause cause : {IdleCause::kLaunching, IdleCause::kOtherCudaApi, IdleCause::kOtherCpu,
                          IdleCause::kWaitBackward, IdleCause::kWaitJobThreads}) {
    sum += in.Idle(cause);
  }
  return sum;
}

}  // namespace gpuos::rule_support
