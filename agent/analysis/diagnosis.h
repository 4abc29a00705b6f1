// Names the dominant bottleneck of the measured steps, with the numbers
// that show it and what to change -- the reasoning users do by hand in the
// Nsight Systems articles and the ECS 251 study.  Each rule measures the
// share of step time it explains (its score); the primary finding is the
// highest-scoring rule that fired, the others are listed after it.
//
// Rules, all over the measured steps' summed wall time W:
//   gpu_bound           kernels run >= kGpuBoundKernelShare of W.
//                       score: that share.
//   data_loader         the launching thread waits in data fetches >=
//                       kDataWaitShare of W and the GPU is idle >=
//                       kGpuIdleHighShare of W.  score: exposed data loading
//                       (the stage, step_stages.h).
//   pageable_copies     the thread sits in pageable cudaMemcpy calls or in
//                       mmap/munmap while no kernel runs >= kPageableShare of
//                       W, with at least one pageable copy.  score: that share.
//   serialized_copies   the GPU copies with no kernel running >=
//                       kSerializedCopyShare of W -- or >=
//                       kSerializedCopyBusyGpuShare both of W and of the
//                       median measured step (the copies cost every step,
//                       not a few stalled ones) -- and
//                       host-to-device copies share streams with kernels
//                       (>= kSameStreamFraction of their time) or hardly
//                       overlap kernels (< kCopyOverlapFraction).  score:
//                       copy-only share.  Beside gpu_bound it comes first:
//                       hiding the copies behind compute (a copy stream) is
//                       the cheap gain, kernel work the expensive one (the
//                       Nsight article's pinned -> copy-stream step; on an
//                       H200 the ResNet-18 sequence gained the 6% its copies
//                       took).
//   launch_bound        the GPU is idle >= kLaunchBoundIdleShare of W,
//                       >= kLaunchBoundCpuFraction of that idle time the
//                       thread is launching, in other CUDA calls or running
//                       other code, kernels average <= kShortKernelNs and
//                       there are >= kMinKernelsPerStep per step.  score:
//                       that idle time / W.
//   cpu_contention      the thread is preempted or waits in the run queue
//                       >= kContentionShare of W while >= kManyWorkers
//                       data-worker processes run.  score: that share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/step_analysis.h"

namespace gpuos {

inline constexpr double kGpuBoundKernelShare = 0.90;
inline constexpr double kDataWaitShare = 0.30;
inline constexpr double kGpuIdleHighShare = 0.30;
inline constexpr double kPageableShare = 0.15;
inline constexpr double kSerializedCopyShare = 0.10;
inline constexpr double kSerializedCopyBusyGpuShare = 0.03;
inline constexpr double kSameStreamFraction = 0.50;
inline constexpr double kCopyOverlapFraction = 0.20;
inline constexpr double kLaunchBoundIdleShare = 0.50;
inline constexpr double kLaunchBoundCpuFraction = 0.50;
inline constexpr uint64_t kShortKernelNs = 50'000;
inline constexpr double kMinKernelsPerStep = 8;
inline constexpr double kContentionShare = 0.10;
inline constexpr uint32_t kManyWorkers = 2;

enum class Bottleneck {
  kNoSteps,         // nothing to diagnose
  kNoGpuActivity,   // steps, but no GPU work recorded for the process
  kNoneDominant,    // no rule fired
  kGpuBound,
  kDataLoader,
  kPageableCopies,
  kSerializedCopies,
  kLaunchBound,
  kCpuContention,
};

const char* BottleneckKey(Bottleneck bottleneck);    // "data_loader_starvation"
const char* BottleneckTitle(Bottleneck bottleneck);  // "data-loader starvation"

struct Finding {
  Bottleneck bottleneck = Bottleneck::kNoSteps;
  double score = 0;  // share of step time the finding explains
  std::string evidence;
  std::string recommendation;
};

struct Diagnosis {
  Finding primary;
  std::vector<Finding> secondary;  // other rules that fired, by score
};

Diagnosis Diagnose(const StepAnalysis& analysis);

}  // namespace gpuos
