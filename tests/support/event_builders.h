// Building blocks of constructed event streams for the analysis tests: an
// event at a time for a thread, and the process and thread starts that name
// them.  Payload-specific builders stay in the tests that shape them.
#pragma once

#include <cstdint>
#include <string>

#include "gpuos_trace.pb.h"

namespace gpuos::test_events {

inline v1::Event Ev(uint64_t ts, uint32_t pid, uint32_t tid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  return e;
}

// Process `pid` (its main thread `pid`) started by `ppid`, at time 0.
inline v1::Event Process(uint32_t pid, uint32_t ppid, const std::string& comm) {
  v1::Event e = Ev(0, pid, pid);
  e.mutable_process_start()->set_ppid(ppid);
  e.mutable_process_start()->set_comm(comm);
  return e;
}

// Thread `tid` of process `pid`, named `comm`, at time 0.
inline v1::Event Thread(uint32_t pid, uint32_t tid, const std::string& comm) {
  v1::Event e = Ev(0, pid, tid);
  e.mutable_thread_start()->set_comm(comm);
  return e;
}

}  // namespace gpuos::test_events
