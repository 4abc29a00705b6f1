// See process_table.h.
#include "stream/process_table.h"

#include <algorithm>

namespace gpuos {

void ProcessTable::Track(const v1::Event& event) {
  latest_ns_ = std::max(latest_ns_, event.ts_ns());
  switch (event.payload_case()) {
    case v1::Event::kProcessStart: {
      Process& p = processes_[event.pid()];
      p = Process{};
      p.start = event.process_start();
      Thread& t = threads_[event.tid()];
      t = Thread{};
      t.pid = event.pid();
      t.comm = event.process_start().comm();
      t.creator_tid = event.process_start().parent_tid();
      t.clone_flags = event.process_start().clone_flags();
      break;
    }
    case v1::Event::kThreadStart: {
      Thread& t = threads_[event.tid()];
      t = Thread{};
      t.pid = event.pid();
      t.comm = event.thread_start().comm();
      t.creator_tid = event.thread_start().creator_tid();
      t.clone_flags = event.thread_start().clone_flags();
      break;
    }
    case v1::Event::kExec: {
      // The thread that called execve takes the process's id.
      if (event.exec().old_tid() != event.pid()) threads_.erase(event.exec().old_tid());
      Thread& t = threads_[event.pid()];
      t.pid = event.pid();
      t.comm = event.exec().comm();
      t.exited = false;
      if (auto it = processes_.find(event.pid()); it != processes_.end()) {
        it->second.start.set_comm(event.exec().comm());
        it->second.rank.reset();  // the new image's environment says anew
      }
      break;
    }
    case v1::Event::kRankInfo:
      if (auto it = processes_.find(event.pid()); it != processes_.end()) it->second.rank = event.rank_info();
      break;
    case v1::Event::kCommChange: {
      if (auto it = threads_.find(event.tid()); it != threads_.end()) it->second.comm = event.comm_change().new_comm();
      if (event.tid() == event.pid()) {
        if (auto it = processes_.find(event.pid()); it != processes_.end()) {
          it->second.start.set_comm(event.comm_change().new_comm());
        }
      }
      break;
    }
    case v1::Event::kThreadExit:
      MarkExited(event.tid(), /*process=*/false, event.ts_ns());
      break;
    case v1::Event::kProcessExit: {
      if (auto it = processes_.find(event.pid()); it != processes_.end()) {
        it->second.wait_status = event.process_exit().wait_status();
      }
      MarkExited(event.pid(), /*process=*/true, event.ts_ns());
      // Its threads are gone with it, whether or not their exits were seen.
      for (auto& [tid, thread] : threads_) {
        if (thread.pid == event.pid() && !thread.exited) MarkExited(tid, /*process=*/false, event.ts_ns());
      }
      break;
    }
    default:
      return;
  }
  ForgetOldExits(latest_ns_);
}

void ProcessTable::MarkExited(uint32_t id, bool process, uint64_t ts_ns) {
  if (process) {
    auto it = processes_.find(id);
    if (it == processes_.end() || it->second.exited) return;
    it->second.exited = true;
  } else {
    auto it = threads_.find(id);
    if (it == threads_.end() || it->second.exited) return;
    it->second.exited = true;
  }
  exits_.push_back({ts_ns, id, process});
}

void ProcessTable::ForgetOldExits(uint64_t now_ns) {
  while (!exits_.empty() &&
         (exits_.size() > kMaxExited || exits_.front().ts_ns + kKeepExitedNs < now_ns)) {
    const Exit e = exits_.front();
    exits_.pop_front();
    // Only if still exited: a pid or tid reused since is a new entry.
    if (e.process) {
      auto it = processes_.find(e.id);
      if (it != processes_.end() && it->second.exited) processes_.erase(it);
    } else {
      auto it = threads_.find(e.id);
      if (it != threads_.end() && it->second.exited) threads_.erase(it);
    }
  }
}

void ProcessTable::ForEachSnapshotEvent(uint64_t ts_ns, const std::function<void(const v1::Event&)>& emit) {
  ForgetOldExits(std::max(latest_ns_, ts_ns));
  v1::Event event;
  for (const auto& [pid, p] : processes_) {
    event.Clear();
    event.set_ts_ns(ts_ns);
    event.set_pid(pid);
    event.set_tid(pid);
    *event.mutable_process_start() = p.start;
    event.mutable_process_start()->set_preexisting(true);
    emit(event);
    if (p.rank) {
      event.Clear();
      event.set_ts_ns(ts_ns);
      event.set_pid(pid);
      event.set_tid(pid);
      *event.mutable_rank_info() = *p.rank;
      emit(event);
    }
  }
  for (const auto& [tid, t] : threads_) {
    if (tid == t.pid) continue;  // the process's start names it
    event.Clear();
    event.set_ts_ns(ts_ns);
    event.set_pid(t.pid);
    event.set_tid(tid);
    auto* start = event.mutable_thread_start();
    start->set_comm(t.comm);
    start->set_creator_tid(t.creator_tid);
    start->set_clone_flags(t.clone_flags);
    start->set_preexisting(true);
    emit(event);
  }
  for (const auto& [tid, t] : threads_) {
    if (!t.exited) continue;
    event.Clear();
    event.set_ts_ns(ts_ns);
    event.set_pid(t.pid);
    event.set_tid(tid);
    event.mutable_thread_exit()->set_comm(t.comm);
    emit(event);
  }
  for (const auto& [pid, p] : processes_) {
    if (!p.exited) continue;
    event.Clear();
    event.set_ts_ns(ts_ns);
    event.set_pid(pid);
    event.set_tid(pid);
    event.mutable_process_exit()->set_comm(p.start.comm());
    event.mutable_process_exit()->set_wait_status(p.wait_status);
    emit(event);
  }
}

}  // namespace gpuos
