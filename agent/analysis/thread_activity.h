// Pass-1 facts about every traced thread that the driving thread and the
// roles of threads are decided from: its process and latest name, its CUDA
// API calls, and who woke it how often (the waker recorded by the kernel at
// sched_waking, bpf/offcpu.bpf.c).  Events in any order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

// The waker of an off-CPU interval, or 0 when there is none to trust:
// traces recorded before the waker was taken at sched_waking (no
// waker_context_known) name the task `current` was at sched_wakeup, which
// may be one an interrupt happened to land on.
inline uint32_t TrustedWaker(const v1::OffCpu& off) {
  return off.waker_context_known() && !off.woken_from_interrupt() ? off.woken_by_tid() : 0;
}

struct ThreadFacts {
  uint32_t pid = 0;
  std::string comm;  // the name with the latest timestamp
  uint64_t comm_ns = 0;
  uint64_t cuda_calls = 0;
  uint64_t launches = 0;
  // Blocked intervals that another thread ended (woken_by_tid set); those
  // a hard or soft interrupt ended.
  uint64_t woken_by_threads = 0;
  uint64_t woken_from_interrupt = 0;
};

struct WakeEdge {
  uint64_t count = 0;       // blocked intervals of the wakee that the waker ended
  uint64_t blocked_ns = 0;  // their blocked time (run-queue tail excluded)
};

class ThreadActivity {
 public:
  void Add(const v1::Event& event);

  // By tid; threads seen in any event.
  const absl::flat_hash_map<uint32_t, ThreadFacts>& threads() const { return threads_; }
  const ThreadFacts* Find(uint32_t tid) const {
    auto it = threads_.find(tid);
    return it == threads_.end() ? nullptr : &it->second;
  }
  // (wakee tid, waker tid) -> how often and how long the waker ended the
  // wakee's waits.
  const absl::flat_hash_map<std::pair<uint32_t, uint32_t>, WakeEdge>& wakes() const { return wakes_; }

 private:
  ThreadFacts& Thread(uint32_t pid, uint32_t tid);
  void SeeComm(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm);

  absl::flat_hash_map<uint32_t, ThreadFacts> threads_;
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, WakeEdge> wakes_;
};

}  // namespace gpuos
