// What each traced thread is to the training loop, for following the
// driving thread's waits to the thread that ended them (wakeup_chain.h):
//   driving      the thread whose progress gates the GPU (driving_thread.h);
//   autograd     PyTorch's autograd engine threads (comm pt_autograd_*),
//                which run the backward pass the driving thread waits for;
//   pin_memory   the thread of the driving process that takes batches from
//                the data workers and hands them on: by name (pt_pin_memory*),
//                or by behaviour, since many jobs leave Python threads named
//                like the process: mostly woken by data workers, and waking
//                the driving thread;
//   data_worker  data-loader workers (StepPlan::IsWorker: descendant
//                processes, threads named pt_data_worker*, gpuos-data-*...);
//   worker_process  the same processes where the trace tells they are not
//                a DataLoader's (StepPlan::WorkersAreNotADataLoaders: the
//                environments of an RL job in subprocesses, a simulator);
//   cuda         CUDA's own threads (cuda-EvtHandlr, cuda000..., cuda-*);
//   thread_pool  the job's compute thread pools, by name (OpenMP, TBB,
//                PyTorch's intra/inter-op pools);
//   other        any other thread of the traced tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "analysis/thread_activity.h"

namespace gpuos {

struct StepPlan;

enum class ThreadRole : uint8_t {
  kOther = 0,
  kDriving,
  kAutograd,
  kPinMemory,
  kDataWorker,
  kWorkerProcess,
  kCuda,
  kThreadPool,
  kCount,
};

const char* ThreadRoleKey(ThreadRole role);   // "pin_memory"
const char* ThreadRoleName(ThreadRole role);  // "pin-memory thread"
// ThreadRoleName, or its plural when `count` is not 1 ("worker processes").
std::string ThreadRoleName(ThreadRole role, size_t count);

// A data worker or a worker process: a chain through one follows the
// thread of its process that handed it the work.
inline bool IsWorkerRole(ThreadRole role) {
  return role == ThreadRole::kDataWorker || role == ThreadRole::kWorkerProcess;
}

// The role a thread's name alone gives (autograd, pin_memory, cuda,
// thread_pool), else kOther.
ThreadRole RoleFromComm(std::string_view comm);

// Behaviour thresholds for a pin-memory thread that has no telling name:
// at least this many of its waits ended by data workers, making at least
// this share of the waits other threads ended, and at least this many
// wakeups of the driving thread.
inline constexpr uint64_t kPinMinWorkerWakes = 3;
inline constexpr double kPinMinWorkerShare = 0.5;
inline constexpr uint64_t kPinMinDriverWakes = 3;

struct ThreadInfo {
  uint32_t pid = 0;
  std::string comm;
  ThreadRole role = ThreadRole::kOther;
};

class ThreadRoles {
 public:
  // Every thread in `activity`; `plan` gives the driving thread (pid/tid)
  // and the data workers.
  static ThreadRoles Assign(const ThreadActivity& activity, const StepPlan& plan);

  // kOther for a thread never seen.
  ThreadRole RoleOf(uint32_t tid) const;
  const ThreadInfo* Find(uint32_t tid) const;
  const absl::flat_hash_map<uint32_t, ThreadInfo>& threads() const { return threads_; }

  // For tests: set one thread's facts directly.
  void Set(uint32_t tid, ThreadInfo info) { threads_[tid] = std::move(info); }

 private:
  absl::flat_hash_map<uint32_t, ThreadInfo> threads_;
};

// Whether a thread acts as the pin-memory thread of the driving thread
// `driver`: woken mostly by data workers and waking the driver (see the
// thresholds above).  `is_worker` tells a data worker by tid.
template <typename IsWorker>
bool ActsAsPinMemoryThread(const ThreadActivity& activity, uint32_t tid, uint32_t driver, IsWorker is_worker) {
  const ThreadFacts* facts = activity.Find(tid);
  if (facts == nullptr || facts->woken_by_threads == 0) return false;
  uint64_t by_workers = 0;
  uint64_t driver_wakes = 0;
  for (const auto& [key, edge] : activity.wakes()) {
    if (key.first == tid && is_worker(key.second)) by_workers += edge.count;
    if (key.first == driver && key.second == tid) driver_wakes += edge.count;
  }
  return by_workers >= kPinMinWorkerWakes &&
         static_cast<double>(by_workers) >= kPinMinWorkerShare * static_cast<double>(facts->woken_by_threads) &&
         driver_wakes >= kPinMinDriverWakes;
}

}  // namespace gpuos
