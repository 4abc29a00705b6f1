// Per-thread facts and the wake graph from pass 1; see thread_activity.h.
#include "analysis/thread_activity.h"

#include <algorithm>

#include "analysis/cuda_api_class.h"
#include "stream/event_comm.h"

namespace gpuos {

ThreadFacts& ThreadActivity::Thread(uint32_t pid, uint32_t tid) {
  ThreadFacts& t = threads_[tid];
  if (t.pid == 0) t.pid = pid;
  return t;
}

void ThreadActivity::SeeComm(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  ThreadFacts& t = Thread(pid, tid);
  // exec keeps the tid and may change the pid (a thread that execs
  // becomes its process's leader): the latest event wins for both.
  if (t.comm.empty() || ts >= t.comm_ns) {
    t.comm = comm;
    t.comm_ns = ts;
    t.pid = pid;
  }
}

void ThreadActivity::Add(const v1::Event& e) {
  switch (e.payload_case()) {
    case v1::Event::kCudaApi: {
      ThreadFacts& t = Thread(e.pid(), e.tid());
      ++t.cuda_calls;
      if (ClassifyCudaApi(e.cuda_api().name()) == CudaApiClass::kLaunch) ++t.launches;
      break;
    }
    case v1::Event::kOffCpu: {
      const v1::OffCpu& off = e.off_cpu();
      ThreadFacts& t = Thread(e.pid(), e.tid());
      if (off.woken_from_interrupt()) ++t.woken_from_interrupt;
      if (TrustedWaker(off) == 0 || off.woken_by_tid() == e.tid()) break;
      ++t.woken_by_threads;
      WakeEdge& edge = wakes_[{e.tid(), off.woken_by_tid()}];
      ++edge.count;
      edge.blocked_ns += off.duration_ns() - std::min(off.runqueue_ns(), off.duration_ns());
      break;
    }
    default:
      if (const std::string* comm = StatedComm(e)) {
        SeeComm(e.ts_ns(), e.pid(), e.tid(), *comm);
      } else if (e.tid() != 0) {
        Thread(e.pid(), e.tid());
      }
      break;
  }
}

}  // namespace gpuos
