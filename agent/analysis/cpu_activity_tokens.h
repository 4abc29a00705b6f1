// The CPU side of a job as a token sequence, for finding its training
// iteration when it has no CUDA (repeating_sequence.h): what the threads of
// one process did at the points where they gave up the CPU or changed
// their memory map.  A training loop blocks at the same points in every
// iteration (waiting for a batch from a worker, for an intra-op thread
// pool, in a pipe or socket read) and maps and unmaps the same sizes (a
// large tensor's allocation), while preemption depends on the machine's
// other load, so, for the process's main thread (where PyTorch scripts and
// most C++ trainers run their loop; helper threads such as intra-op pools,
// which spin before they sleep, and timer threads block on their own
// clocks and would blur the sequence):
//   - a voluntary off-CPU interval (blocked in a futex, a syscall, a page
//     fault) is a token named by the cause and the syscall;
//   - an mmap or munmap call is a token named by the length;
//   - preemptions (involuntary switches) are not tokens.
// A loop that never blocks and reuses its memory (a single-threaded,
// compute-bound CPU loop) leaves no tokens to repeat: then there is no
// period to find, and the report says so.
// It also keeps every thread's off-CPU intervals (every cause) to say how
// long the thread ran between two moments: the CPU work between two
// backward passes or in a step (accumulation_period.h, step_extra_work.h),
// and its page faults (the copy-on-write faults after a fork); the loop
// may run on a thread of its own (Ray Train, a launcher that keeps the main
// thread for signals).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/repeating_sequence.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class CpuActivityTokens {
 public:
  // Events in any order.
  void Add(const v1::Event& event);

  // The process with the most tokens (0 when none), and its tokens in time
  // order with the symbols' names (`names[symbol]`).
  uint32_t BusiestProcess() const;
  std::vector<SequenceToken> Tokens(uint32_t pid, std::vector<std::string>& names) const;
  size_t TokenCount(uint32_t pid) const;

  // Whether thread `tid` went off the CPU at all in the trace (without
  // that, how long it ran is unknown).
  bool HasTimeline(uint32_t tid) const;
  // The time thread `tid` was on the CPU in [from, to): the span less its
  // off-CPU intervals, blocked or preempted.  After every Add.
  uint64_t RunningNs(uint32_t tid, uint64_t from, uint64_t to) const;
  // The page faults of thread `tid` recorded in [from, to).
  uint64_t PageFaults(uint32_t tid, uint64_t from, uint64_t to) const;

 private:
  struct Token {
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t symbol;
  };
  uint32_t Symbol(const std::string& name);
  void SortOnce() const;
  absl::flat_hash_map<uint32_t, std::vector<Token>> by_pid_;
  // Thread -> its off-CPU intervals (start, end); sorted on first use
  // (events come in any order).
  mutable absl::flat_hash_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> off_cpu_;
  mutable bool sorted_ = true;
  // Thread -> its page-fault records (time, faults), sorted likewise.
  mutable absl::flat_hash_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> page_faults_;
  absl::flat_hash_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
};

}  // namespace gpuos
