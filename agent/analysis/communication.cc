// Communication per step from a rank's waits and kernels; see communication.h.
#include "analysis/communication.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace gpuos {
namespace {

using Spans = std::vector<std::pair<uint64_t, uint64_t>>;

// Sorted, non-overlapping.
Spans Merge(Spans spans) {
  std::sort(spans.begin(), spans.end());
  Spans out;
  for (const auto& [s, e] : spans) {
    if (e <= s) continue;
    if (!out.empty() && s <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(s, e);
    }
  }
  return out;
}

// a minus b, both merged.
Spans Minus(const Spans& a, const Spans& b) {
  Spans out;
  size_t j = 0;
  for (auto [s, e] : a) {
    while (j < b.size() && b[j].second <= s) ++j;
    size_t k = j;
    while (s < e) {
      if (k >= b.size() || b[k].first >= e) {
        out.emplace_back(s, e);
        break;
      }
      if (b[k].first > s) out.emplace_back(s, b[k].first);
      s = std::max(s, b[k].second);
      ++k;
    }
  }
  return out;
}

// a and b, both merged.
Spans Intersect(const Spans& a, const Spans& b) {
  Spans out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint64_t s = std::max(a[i].first, b[j].first);
    const uint64_t e = std::min(a[i].second, b[j].second);
    if (s < e) out.emplace_back(s, e);
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return out;
}

// Length of merged `spans` within [s, e).
uint64_t Measure(const Spans& spans, uint64_t s, uint64_t e) {
  auto it = std::lower_bound(spans.begin(), spans.end(), s,
                             [](const std::pair<uint64_t, uint64_t>& x, uint64_t v) { return x.second <= v; });
  uint64_t total = 0;
  for (; it != spans.end() && it->first < e; ++it) {
    total += std::min(it->second, e) - std::max(it->first, s);
  }
  return total;
}

}  // namespace

bool IsNcclKernel(std::string_view name) {
  return name.rfind("ncclKernel", 0) == 0 || name.rfind("ncclDevKernel", 0) == 0;
}

absl::flat_hash_set<int32_t> NetworkWaitSyscalls(const v1::TraceHeader& header) {
  static const absl::flat_hash_set<std::string_view> kNames = {
      "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2",
      "recvfrom", "recvmsg", "recvmmsg"};
  absl::flat_hash_set<int32_t> out;
  for (const auto& [nr, name] : header.syscall_names()) {
    if (kNames.contains(name)) out.insert(nr);
  }
  return out;
}

namespace {

bool IsNetworkWait(const CommunicationInput& in, const ThreadWait& w) {
  if (!w.blocked) return false;
  if (w.waker_pid != 0 && in.peer_pids.contains(w.waker_pid)) return true;
  return w.from_interrupt && in.network_syscalls.contains(w.syscall_nr);
}

bool IsWaitOnCommThread(const ThreadWait& w, const absl::flat_hash_set<uint32_t>& comm) {
  return w.blocked && w.waker_tid != w.tid && comm.contains(w.waker_tid);
}

// (b): a comm thread (not a network thread) woken by a network thread.
bool IsWaitForPeers(const ThreadWait& w, const absl::flat_hash_set<uint32_t>& comm,
                    const absl::flat_hash_set<uint32_t>& network) {
  return w.blocked && comm.contains(w.tid) && !network.contains(w.tid) && network.contains(w.waker_tid);
}

// Sorted ends of the waits for peers.
std::vector<uint64_t> WaitForPeersEnds(const CommunicationInput& in, const absl::flat_hash_set<uint32_t>& comm,
                                       const absl::flat_hash_set<uint32_t>& network) {
  std::vector<uint64_t> ends;
  for (const ThreadWait& w : in.waits) {
    if (w.tid != in.driving_tid && IsWaitForPeers(w, comm, network)) ends.push_back(w.end_ns);
  }
  std::sort(ends.begin(), ends.end());
  return ends;
}

}  // namespace

CommunicationThreads ClassifyCommunicationThreads(const CommunicationInput& in) {
  CommunicationThreads out;
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint32_t>> waits;  // tid -> (network, all blocked)
  for (const ThreadWait& w : in.waits) {
    if (!w.blocked) continue;
    auto& [network, all] = waits[w.tid];
    ++all;
    if (IsNetworkWait(in, w)) ++network;
  }
  for (const auto& [tid, counts] : waits) {
    if (counts.first >= kMinNetworkWaits && counts.first >= kMinNetworkFraction * counts.second) {
      out.network.insert(tid);
    }
  }
  // Threads fed by the network threads.
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint32_t>> fed;  // tid -> (by network, all blocked)
  for (const ThreadWait& w : in.waits) {
    if (!w.blocked || out.network.contains(w.tid)) continue;
    auto& [by_net, all] = fed[w.tid];
    ++all;
    if (w.waker_tid != w.tid && out.network.contains(w.waker_tid)) ++by_net;
  }
  out.comm = out.network;
  for (const auto& [tid, counts] : fed) {
    if (counts.first >= kMinNetworkWaits && counts.first >= kMinCommWaitFraction * counts.second) out.comm.insert(tid);
  }
  return out;
}

CommunicationAnalysis AnalyzeCommunication(const CommunicationInput& in,
                                           const std::vector<std::pair<uint64_t, uint64_t>>& steps) {
  CommunicationAnalysis out;
  auto is_network_wait = [&](const ThreadWait& w) { return IsNetworkWait(in, w); };
  CommunicationThreads threads = ClassifyCommunicationThreads(in);
  absl::flat_hash_set<uint32_t>& network = threads.network;
  absl::flat_hash_set<uint32_t>& comm = threads.comm;
  comm.erase(in.driving_tid);
  network.erase(in.driving_tid);
  out.network_threads.assign(network.begin(), network.end());
  out.comm_threads.assign(comm.begin(), comm.end());
  std::sort(out.network_threads.begin(), out.network_threads.end());
  std::sort(out.comm_threads.begin(), out.comm_threads.end());

  Spans comm_spans, driving_off, other_kernels;
  for (const KernelSpan& k : in.kernels) {
    (k.nccl ? comm_spans : other_kernels).emplace_back(k.start_ns, k.end_ns);
  }
  for (const ThreadWait& w : in.waits) {
    if (w.tid == in.driving_tid) {
      driving_off.emplace_back(w.start_ns, w.end_ns);
      if (IsWaitOnCommThread(w, comm) || is_network_wait(w)) comm_spans.emplace_back(w.start_ns, w.end_ns);
    } else if (IsWaitForPeers(w, comm, network)) {
      comm_spans.emplace_back(w.start_ns, w.end_ns);
    }
  }
  const Spans all_comm = Merge(std::move(comm_spans));
  // Where nothing computes: the driving thread off the CPU and no
  // non-communication kernel running.
  const Spans no_compute = Minus(Merge(std::move(driving_off)), Merge(std::move(other_kernels)));
  const Spans exposed = Intersect(all_comm, no_compute);
  const std::vector<uint64_t> ends = WaitForPeersEnds(in, comm, network);
  out.steps.reserve(steps.size());
  for (const auto& [s, e] : steps) {
    StepCommunication step{Measure(all_comm, s, e), Measure(exposed, s, e), {}};
    step.collective_ends_ns.assign(std::lower_bound(ends.begin(), ends.end(), s),
                                   std::lower_bound(ends.begin(), ends.end(), e));
    out.steps.push_back(std::move(step));
  }
  return out;
}

}  // namespace gpuos
