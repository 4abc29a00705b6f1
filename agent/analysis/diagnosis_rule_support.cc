// Shared pieces of the diagnosis rules; see diagnosis_rule_support.h.
#include "analysis/diagnosis_rule_support.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gpuos::rule_support {

double Share(uint64_t part, uint64_t whole) { return whole ? static_cast<double>(part) / whole : 0.0; }

std::string Pct(double share) { return absl::StrFormat("%.1f%%", share * 100); }

std::string GainText(const Finding& f) {
  if (!f.gain) return absl::StrFormat(" Expected gain: %s.", f.gain_model);
  return absl::StrFormat(" Expected gain: the mean step %s shorter (model: %s).", Pct(*f.gain), f.gain_model);
}

void AppendGain(Finding& f) { f.evidence += GainText(f); }

std::string WorkersText(const StepAnalysis& a) {
  if (a.worker_processes == 0) return "no data worker processes (loading runs in the training thread)";
  std::string s = absl::StrFormat("%u data worker processes", a.worker_processes);
  if (a.worker_processes_started > a.worker_processes) {
    s += absl::StrFormat(" at a time (%u started in the run)", a.worker_processes_started);
  }
  if (a.practices.online_cpus > 0) s += absl::StrFormat(" on a host with %u online CPUs", a.practices.online_cpus);
  return s;
}

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

IdleWithoutChurn IdleBesidesChurn(const DiagnosisInputs& in) {
  const GpuParts& gpu = in.total().gpu;
  IdleWithoutChurn out;
  out.churn_ns = std::min(gpu.idle_allocation_ns, gpu.idle_ns);
  out.idle_ns = gpu.idle_ns - out.churn_ns;
  const uint64_t churn_cpu_side = out.churn_ns - std::min(out.churn_ns, in.Idle(IdleCause::kAllocating));
  const uint64_t cpu_side = CpuSideIdle(in);
  out.cpu_side_ns = cpu_side - std::min(cpu_side, churn_cpu_side);
  return out;
}

}  // namespace gpuos::rule_support
