// What several diagnosis rules (and the diagnosis around them) share: the
// share and percent they print, the expected-gain sentence, the phrase for
// the job's own CPU work, the GPU idle that waited on the CPU side, and the
// part of it the allocator's churn accounts for.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/data_pipeline_bound.h"
#include "analysis/diagnosis.h"

namespace gpuos::rule_support {

double Share(uint64_t part, uint64_t whole);  // 0 when whole is 0
std::string Pct(double share);                // 0.123 -> "12.3%"

// " Expected gain: the mean step 12.3% shorter (model: ...)."
std::string GainText(const Finding& f);
void AppendGain(Finding& f);

// "4 data worker processes at a time (40 started in the run) on a host with
// 16 online CPUs", or that there are none.
std::string WorkersText(const StepAnalysis& a);

// The workers fill the host's CPUs: one CPU is the training thread's.
bool WorkersAtCoreCount(const StepAnalysis& a);

// What held the data pipeline back (data_pipeline_bound.h), without the
// steps that started DataLoader workers again where that finding counts.
DataPipelineBound PipelineBound(const DiagnosisInputs& in);

// `bound` as a sentence: " While the loop waited for data, the data loading
// ... was ... of the ... ms a step the trace explains."; empty when the
// trace explains too little of the wait.
std::string DataPipelineText(const DiagnosisInputs& in, const DataPipelineBound& bound);

// What to do about a data-loading bottleneck: by what held the pipeline
// back, and by the workers there are and the CPUs they have.
std::string DataLoaderAdvice(const DiagnosisInputs& in, const DataPipelineBound& bound);

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

// The GPU idle the thread's allocation calls account for (allocator churn:
// no CUDA graph removes it), and the idle and CPU-side idle besides it: the
// CPU-side idle less the part of the churn's charged to CPU-side causes (the
// stretches after a free, while the thread launched again).  Launch-bound
// judges the idle besides the churn.
struct IdleWithoutChurn {
  uint64_t churn_ns = 0;
  uint64_t idle_ns = 0;      // GPU idle besides the churn's
  uint64_t cpu_side_ns = 0;  // CpuSideIdle besides the churn's
};
IdleWithoutChurn IdleBesidesChurn(const DiagnosisInputs& in);

}  // namespace gpuos::rule_support
