// The driving thread: the thread whose progress gates the GPU.  In PyTorch
// it is the Python thread that runs the training loop; the autograd engine
// threads, the pin-memory thread, the data workers and CUDA's own threads
// are its helpers, and launch counts do not tell them apart (the autograd
// thread launches every backward kernel).  So the choice goes by who waits
// for whom, among the threads of the process the steps were found in:
//   1. helpers known by name (thread_roles.h: autograd, pin-memory, CUDA's
//      and pool threads), data workers and the caller's `helpers` (a
//      rank's communication threads, communication.h: gloo's workers wake
//      the training thread at the end of every collective, which would
//      otherwise read as feeding it) are never the driver;
//   2. when some of the remaining threads made CUDA calls, only those stay:
//      the driver issues the GPU's work;
//   3. a remaining thread that made no CUDA call and whose waits were mostly
//      ended by one other remaining thread is fed by it (a queue feeder, an
//      OpenMP worker): that other thread hands it work, so it goes;
//   4. the driver is the one whose waits other threads ended most often: it
//      is where the helpers' work (batches from the workers or the
//      pin-memory thread, the backward pass, GPU syncs) flows in; within
//      kDrivingScoreMargin of the best, the process's main thread, then
//      the most CUDA calls, then the lowest tid.
// Steps taken from a thread's own ranges (NVTX step ranges, optimizer.step)
// already name the driver; the choice replaces only the thread picked for
// unannotated steps.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "analysis/step_finder.h"
#include "analysis/thread_activity.h"

namespace gpuos {

inline constexpr double kDrivingScoreMargin = 0.10;

struct DrivingChoice {
  bool chosen = false;  // false: no thread of the process qualifies
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  std::string why;  // for the report
};

// Whether the steps came from one thread's own ranges, which makes that
// thread the driver.
bool StepsNameTheirThread(StepSource source);

DrivingChoice ChooseDrivingThread(const ThreadActivity& activity, const StepPlan& plan,
                                  const absl::flat_hash_set<uint32_t>& helpers = {});

// Applies the choice to `plan` when its steps do not name their thread:
// pid, tid and thread_comm; the data workers stay (same process).  Returns
// the text the report shows about the driving thread.
std::string ApplyDrivingThread(const ThreadActivity& activity, StepPlan& plan,
                               const absl::flat_hash_set<uint32_t>& helpers = {});

}  // namespace gpuos
