// What several diagnosis rules (and the diagnosis around them) share: the
// share and percent they print, the expected-gain sentence, the phrase for
// the job's own CPU work, and the GPU idle that waited on the CPU side.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/diagnosis.h"

namespace gpuos::rule_support {

double Share(uint64_t part, uint64_t whole);  // 0 when whole is 0
std::string Pct(double share);                // 0.123 -> "12.3%"

// " Expected gain: the mean step 12.3% shorter (model: ...)."
std::string GainText(const Finding& f);
void AppendGain(Finding& f);

// What host_work is, as both rules that name it say it.
std::string HostWorkText();

// GPU idle while the job's CPU side was issuing or preparing work: launch
// and other CUDA calls, running code between them, waiting for the
// autograd thread's or the job's other threads' CPU work.  Not the job's
// own CPU work away from CUDA calls (host_cpu_work): no CUDA graph shortens
// that.  A wait nobody in the job ended (a futex with an unknown waker,
// another blocking syscall) or a GPU sync is not evidence that the CPU is
// too slow to feed the GPU.
uint64_t CpuSideIdle(const DiagnosisInputs& in);

}  // namespace gpuos::rule_support
