// Wakeup chains and the states of the threads on them; see wakeup_chain.h.
#include "analysis/wakeup_chain.h"

#include <algorithm>

#include "common/interval_union.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

const char* HopStateKey(HopState state) {
  switch (state) {
    case HopState::kRunning: return "running";
    case HopState::kRunqueue: return "runqueue";
    case HopState::kPreempted: return "preempted";
    case HopState::kPageFault: return "page_fault";
    case HopState::kMmapMunmap: return "mmap_munmap";
    case HopState::kIo: return "io";
    case HopState::kDisk: return "disk";
    case HopState::kFutex: return "futex";
    case HopState::kUnknown:
    case HopState::kCount: break;
  }
  return "unknown";
}

const char* HopStateName(HopState state) {
  switch (state) {
    case HopState::kRunning: return "on-CPU";
    case HopState::kRunqueue: return "in the run queue";
    case HopState::kPreempted: return "preempted";
    case HopState::kPageFault: return "page-faulting";
    case HopState::kMmapMunmap: return "in mmap/munmap";
    case HopState::kIo: return "blocked in a syscall (I/O)";
    case HopState::kDisk: return "waiting for disk (its own block I/O)";
    case HopState::kFutex: return "in futex";
    case HopState::kUnknown:
    case HopState::kCount: break;
  }
  return "blocked (cause unknown)";
}

WaitOn ClassifyChain(const std::vector<uint32_t>& hops, const ThreadRoles& roles) {
  if (hops.empty()) return WaitOn::kNone;
  for (uint32_t tid : hops) {
    const ThreadRole role = roles.RoleOf(tid);
    if (role == ThreadRole::kDataWorker || role == ThreadRole::kPinMemory) return WaitOn::kData;
    if (role == ThreadRole::kWorkerProcess) return WaitOn::kWorkerProcesses;
  }
  switch (roles.RoleOf(hops.front())) {
    case ThreadRole::kAutograd: return WaitOn::kBackward;
    case ThreadRole::kCuda: return WaitOn::kGpuSync;
    default: break;
  }
  return WaitOn::kJobThreads;
}

absl::flat_hash_set<uint32_t> ThreadsThatCanBeOnAChain(const ThreadActivity& activity, uint32_t driver) {
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> wakers;
  for (const auto& [key, edge] : activity.wakes()) wakers[key.first].push_back(key.second);
  absl::flat_hash_set<uint32_t> out;
  std::vector<uint32_t> level = {driver};
  for (size_t hop = 0; hop < kMaxWakeHops && !level.empty(); ++hop) {
    std::vector<uint32_t> next;
    for (uint32_t tid : level) {
      auto it = wakers.find(tid);
      if (it == wakers.end()) continue;
      for (uint32_t waker : it->second) {
        if (waker != driver && out.insert(waker).second) next.push_back(waker);
      }
    }
    level = std::move(next);
  }
  return out;
}

void ThreadTimelines::AddBlockIo(uint32_t tid, uint64_t start_ns, uint64_t end_ns) {
  if (end_ns > start_ns) block_io_[tid].push_back({start_ns, end_ns});
}

void ThreadTimelines::Finish() {
  for (auto& [tid, v] : by_thread_) {
    std::sort(v.begin(), v.end(),
              [](const OffCpuInterval& a, const OffCpuInterval& b) { return a.start_ns < b.start_ns; });
  }
  // Requests overlap (a queue of them): keep their union.
  for (auto& [tid, v] : block_io_) UniteOverlapping(v);
}

uint64_t ThreadTimelines::BlockIoOverlap(uint32_t tid, uint64_t from, uint64_t to) const {
  auto it = block_io_.find(tid);
  if (it == block_io_.end() || to <= from) return 0;
  const std::vector<Interval>& v = it->second;
  uint64_t overlap = 0;
  auto first = std::partition_point(v.begin(), v.end(), [&](const Interval& iv) { return iv.end_ns <= from; });
  for (auto i = first; i != v.end() && i->start_ns < to; ++i) {
    overlap += std::min(i->end_ns, to) - std::max(i->start_ns, from);
  }
  return overlap;
}

size_t ThreadTimelines::size() const {
  size_t n = 0;
  for (const auto& [tid, v] : by_thread_) n += v.size();
  return n;
}

namespace {

bool IsRelay(ThreadRole role) { return role == ThreadRole::kPinMemory || role == ThreadRole::kOther; }

HopState BlockedState(const OffCpuInterval& iv) {
  if (iv.mm != 0) return HopState::kMmapMunmap;
  switch (iv.cause) {
    case v1::OFF_CPU_CAUSE_FUTEX: return HopState::kFutex;
    case v1::OFF_CPU_CAUSE_SYSCALL: return HopState::kIo;
    case v1::OFF_CPU_CAUSE_PAGE_FAULT: return HopState::kPageFault;
    case v1::OFF_CPU_CAUSE_PREEMPTED: return HopState::kPreempted;
    default: return HopState::kUnknown;
  }
}

}  // namespace

WaitChain ThreadTimelines::Follow(uint32_t wakee, uint64_t start_ns, uint64_t wake_ns, uint32_t waker,
                                  const ThreadRoles& roles) const {
  WaitChain chain;
  if (waker == 0 || waker == wakee || roles.Find(waker) == nullptr) return chain;
  chain.hops.push_back(waker);
  uint32_t current = waker;
  uint64_t at = wake_ns;
  while (chain.hops.size() < kMaxWakeHops) {
    const ThreadRole role = roles.RoleOf(current);
    if (!IsRelay(role) && !IsWorkerRole(role)) break;
    auto it = by_thread_.find(current);
    if (it == by_thread_.end()) break;
    // What the relay itself waited for: of its waits that ended within the
    // wait before it woke the next hop, the one that blocked it longest
    // there.  (Not simply its last: a relay often trades a few quick
    // wakeups with a helper -- a socket handshake -- after the wait that
    // mattered.)
    const std::vector<OffCpuInterval>& v = it->second;
    const OffCpuInterval* last = nullptr;
    uint64_t longest = 0;
    auto upper = std::partition_point(v.begin(), v.end(), [&](const OffCpuInterval& iv) { return iv.start_ns < at; });
    for (auto i = upper; i != v.begin();) {
      --i;
      if (i->end_ns < start_ns) break;
      if (i->cause == v1::OFF_CPU_CAUSE_PREEMPTED || i->wake_ns > at || i->wake_ns < start_ns) continue;
      const uint64_t blocked = i->wake_ns - std::max(i->start_ns, start_ns);
      if (last == nullptr || blocked > longest) {
        last = &*i;
        longest = blocked;
      }
    }
    if (last == nullptr || last->waker_tid == 0 || last->waker_tid == wakee || last->waker_tid == current ||
        roles.Find(last->waker_tid) == nullptr ||
        std::find(chain.hops.begin(), chain.hops.end(), last->waker_tid) != chain.hops.end()) {
      break;
    }
    // A worker thread that was itself woken by another thread of its
    // process (Python's queue feeder thread, woken by the worker that
    // put the batch) hands on that thread's work: follow it there.  A
    // worker woken from outside its process did the work itself.
    if (IsWorkerRole(role) && roles.Find(last->waker_tid)->pid != roles.Find(current)->pid) break;
    current = last->waker_tid;
    at = last->wake_ns;
    chain.hops.push_back(current);
  }
  chain.on = ClassifyChain(chain.hops, roles);
  return chain;
}

void ThreadTimelines::AddStates(uint32_t tid, uint64_t from, uint64_t to, HopStates& out) const {
  if (to <= from) return;
  uint64_t off = 0;
  auto it = by_thread_.find(tid);
  if (it != by_thread_.end()) {
    const std::vector<OffCpuInterval>& v = it->second;
    // Intervals of one thread do not overlap: sorted by start, they are
    // sorted by end too.
    auto first = std::partition_point(v.begin(), v.end(), [&](const OffCpuInterval& iv) { return iv.end_ns <= from; });
    for (auto i = first; i != v.end() && i->start_ns < to; ++i) {
      auto part = [&](uint64_t a, uint64_t b, HopState state) {
        a = std::max(a, from);
        b = std::min(b, to);
        if (b <= a) return;
        out[static_cast<size_t>(state)] += b - a;
        off += b - a;
      };
      if (i->cause == v1::OFF_CPU_CAUSE_PREEMPTED) {
        part(i->start_ns, i->end_ns, HopState::kPreempted);
        continue;
      }
      const uint64_t wake = std::clamp(i->wake_ns, i->start_ns, i->end_ns);
      // The blocked part; where the thread's own block I/O was in flight
      // meanwhile (and it was not in futex or mmap/munmap), it waited for disk.
      const HopState blocked = BlockedState(*i);
      const uint64_t a = std::max(i->start_ns, from), b = std::min(wake, to);
      if (b > a) {
        const bool may_be_disk =
            blocked == HopState::kIo || blocked == HopState::kPageFault || blocked == HopState::kUnknown;
        const uint64_t disk = may_be_disk ? BlockIoOverlap(tid, a, b) : 0;
        out[static_cast<size_t>(HopState::kDisk)] += disk;
        out[static_cast<size_t>(blocked)] += b - a - disk;
        off += b - a;
      }
      part(wake, i->end_ns, i->mm != 0 ? HopState::kMmapMunmap : HopState::kRunqueue);
    }
  }
  const uint64_t span = to - from;
  out[static_cast<size_t>(HopState::kRunning)] += span - std::min(off, span);
}

void MergeVia(std::vector<WaitVia>& into, const std::vector<WaitVia>& from) {
  for (const WaitVia& v : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const WaitVia& x) {
      return x.cause == v.cause && x.hop == v.hop && x.last == v.last && x.tid == v.tid;
    });
    if (it == into.end()) {
      into.push_back(v);
      continue;
    }
    it->ns += v.ns;
    for (size_t i = 0; i < kHopStateCount; ++i) it->states[i] += v.states[i];
  }
}

}  // namespace gpuos
