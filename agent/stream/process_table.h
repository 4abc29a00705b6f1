// The processes and threads a recording knows at this moment, with their
// current names, kept from the start/exit/exec/comm events that pass by:
// what a flight recorder writes at the head of each segment, so that a
// window whose older events have rotated out still names every thread.
// Memory grows with the live threads (and a bounded number of recently
// exited ones), never with the number of events.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "gpuos_trace.pb.h"

namespace gpuos {

class ProcessTable {
 public:
  // A thread or process that exited stays listed this long (by event time)
  // after its exit, so that late events of it (the agent's per-second totals,
  // CUDA records that arrive after the thread is gone) still find it.
  static constexpr uint64_t kKeepExitedNs = 10'000'000'000;
  // At most this many exited threads are kept, the oldest forgotten first.
  static constexpr size_t kMaxExited = 4096;

  void Track(const v1::Event& event);

  // The table as events at `ts_ns`: a `preexisting` ProcessStart for every
  // process (and its RankInfo, when it has one), then a ThreadStart for every other thread, then, for those
  // that have exited, a ThreadExit / ProcessExit at `ts_ns`.
  void ForEachSnapshotEvent(uint64_t ts_ns, const std::function<void(const v1::Event&)>& emit);

  size_t processes() const { return processes_.size(); }
  size_t threads() const { return threads_.size(); }

 private:
  struct Process {
    v1::ProcessStart start;
    std::optional<v1::RankInfo> rank;
    bool exited = false;
    int32_t wait_status = 0;
  };
  struct Thread {
    uint32_t pid = 0;
    std::string comm;
    uint32_t creator_tid = 0;
    uint64_t clone_flags = 0;
    bool exited = false;
  };
  struct Exit {
    uint64_t ts_ns;
    uint32_t id;
    bool process;
  };
  void MarkExited(uint32_t id, bool process, uint64_t ts_ns);
  void ForgetOldExits(uint64_t now_ns);

  std::map<uint32_t, Process> processes_;  // by pid
  std::map<uint32_t, Thread> threads_;     // by tid, main threads included
  std::deque<Exit> exits_;                 // in exit order
  uint64_t latest_ns_ = 0;
};

}  // namespace gpuos
