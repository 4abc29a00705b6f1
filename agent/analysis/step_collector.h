// Pass 2 over a trace: with the steps and the driving thread known
// (step_finder.h, driving_thread.h), keep what the breakdown needs -- the
// driving thread's CUDA API calls, data-fetch ranges, off-CPU intervals and
// mmap/munmap calls, and its process's GPU work, as compact spans within
// the steps; the off-CPU intervals of the threads that woke it (and their
// wakers, a few hops back), to follow its waits back through their wakers
// (wakeup_chain.h) -- and
// count context switches by role and page faults per step as the events go
// by.  Events may come in any order (CUDA records arrive late,
// off-CPU records are written at switch-in).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "analysis/step_breakdown.h"
#include "analysis/step_finder.h"
#include "analysis/step_name_matcher.h"
#include "analysis/step_options.h"
#include "analysis/step_timeline.h"
#include "analysis/thread_roles.h"
#include "analysis/wakeup_chain.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class StepCollector {
 public:
  // `header` gives the syscall numbers of mmap and munmap (an off-CPU
  // interval blocked in them counts as mmap/munmap even when the call's own
  // record was dropped).  Fails when the data-range regex does not compile.
  // `roles` (which must outlive the collector) names the threads on the
  // wakeup chains, and `chain_threads` says which threads' off-CPU
  // intervals to keep for them (ThreadsThatCanBeOnAChain); without them no
  // chain is followed.
  static absl::StatusOr<std::unique_ptr<StepCollector>> Create(
      const StepPlan& plan, const StepOptions& options, const v1::TraceHeader& header,
      const ThreadRoles* roles = nullptr, absl::flat_hash_set<uint32_t> chain_threads = {});

  void Add(const v1::Event& event);
  // One record per plan step, in the plan's order.
  std::vector<StepRecord> Finish();

  size_t spans() const { return spans_.size(); }

 private:
  StepCollector(const StepPlan& plan, StepNameMatcher data) : plan_(plan), data_(std::move(data)) {}
  // The step containing `ts`, or -1.
  int64_t StepAt(uint64_t ts) const;
  bool InSpan(uint64_t start, uint64_t duration) const;
  uint8_t MmKind(int32_t syscall_nr) const;
  void AddSpan(const TimelineSpan& span) { spans_.push_back(span); }
  // A block I/O request: counted for its step by the issuer's role, kept
  // as a span (the driving thread's) or in the chain threads' timelines.
  void AddBlockIo(const v1::Event& e, bool launching);
  // Add's parts: the process's kernels, copies and memsets; the driving
  // thread's mmap/munmap calls; an off-CPU interval (switch counts, the
  // chains' timelines, the driving thread's blocked and preempted spans).
  void AddGpuWork(const v1::Event& e);
  void AddMemoryMap(const v1::Event& e);
  void AddOffCpu(const v1::Event& e, bool launching);
  // Resolves the driving thread's blocked spans' wakers into chains.
  void FollowWaits();
  // Sets kApiNextCopiesToDevice (step_timeline.h) on the launching thread's calls.
  void MarkCallsBeforeCopiesToDevice();
  // Turns a step's chain slices into its `via` rows.
  void AddVia(StepRecord& step) const;

  const StepPlan plan_;
  StepNameMatcher data_;
  uint64_t lo_ = 0;  // first step start
  uint64_t hi_ = 0;  // last step end
  int32_t munmap_nr_ = -1;
  int32_t mmap_nr_ = -1;
  int32_t mmap2_nr_ = -1;
  std::vector<uint64_t> starts_;  // of plan_.steps
  std::vector<TimelineSpan> spans_;
  // What a copy's GPU record says, by correlation id, for its API call.
  struct CopyRecord {
    bool pageable;   // touched pageable memory
    bool to_device;  // host to device
  };
  absl::flat_hash_map<uint32_t, CopyRecord> copies_;
  std::vector<StepOsCosts> os_;  // switches and page faults, per step
  // Child pid -> the step it started in and its comm then (its parent's),
  // until its exec.
  absl::flat_hash_map<uint32_t, std::pair<int64_t, std::string>> child_starts_;
  const ThreadRoles* roles_ = nullptr;
  absl::flat_hash_set<uint32_t> chain_threads_;
  ThreadTimelines timelines_;
  std::vector<WaitChain> chains_;
};

}  // namespace gpuos
