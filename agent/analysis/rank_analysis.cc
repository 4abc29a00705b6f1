// Ranks found and analyzed one by one; see rank_analysis.h.
#include "analysis/rank_analysis.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "analysis/training_processes.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

using EachEvent = std::function<absl::Status(const std::function<void(const v1::Event&)>&)>;
// The step analysis of the processes in the first set, the threads in the
// second never taken for the driving thread.
using StepsOf = std::function<absl::StatusOr<StepAnalysis>(const absl::flat_hash_set<uint32_t>&,
                                                           const absl::flat_hash_set<uint32_t>&)>;

// Pass 1: the process tree, the rank environments and the kernels' devices.
struct TreeScan {
  absl::flat_hash_map<uint32_t, uint32_t> parent;
  std::map<uint32_t, v1::RankInfo> rank_info;  // by pid
  absl::flat_hash_map<uint32_t, uint32_t> min_device;
  TrainingMarkCounter training;

  void Add(const v1::Event& e) {
    training.Add(e);
    switch (e.payload_case()) {
      case v1::Event::kProcessStart:
        parent[e.pid()] = e.process_start().ppid();
        rank_info.erase(e.pid());  // a reused pid starts afresh
        break;
      case v1::Event::kExec:
        rank_info.erase(e.pid());  // its RankInfo, if any, follows
        break;
      case v1::Event::kRankInfo:
        if (e.rank_info().has_rank() || e.rank_info().has_local_rank()) rank_info[e.pid()] = e.rank_info();
        break;
      case v1::Event::kGpuKernel: {
        auto [it, inserted] = min_device.try_emplace(e.pid(), e.gpu_kernel().device());
        if (!inserted) it->second = std::min(it->second, e.gpu_kernel().device());
        break;
      }
      default:
        break;
    }
  }
};

int32_t RankNumber(const v1::RankInfo& info) { return info.has_rank() ? info.rank() : info.local_rank(); }

bool SameRank(const v1::RankInfo& a, const v1::RankInfo& b) {
  return a.host() == b.host() && RankNumber(a) == RankNumber(b) && a.has_rank() == b.has_rank();
}

using RanksByPid = std::map<uint32_t, RankSummary>;

// Calls `visit` on each ancestor of `pid` in the tree, nearest first, until
// it returns true.
void VisitAncestors(const TreeScan& tree, uint32_t pid, const std::function<bool(uint32_t)>& visit) {
  absl::flat_hash_set<uint32_t> seen;
  for (auto it = tree.parent.find(pid); it != tree.parent.end() && seen.insert(it->second).second;
       it = tree.parent.find(it->second)) {
    if (visit(it->second)) return;
  }
}

// The rank processes: a process with a RankInfo is one unless an ancestor
// carries the same rank.  At most kMaxRanksAnalyzed, the lowest ranks;
// `note` says how many more were left out.
RanksByPid FindRankProcesses(const TreeScan& tree, std::string* note) {
  RanksByPid by_pid;
  for (const auto& [pid, rank_info] : tree.rank_info) {
    // Lambdas cannot capture structured bindings in C++17 (clang refuses).
    const auto& info = rank_info;
    bool inherited = false;
    VisitAncestors(tree, pid, [&](uint32_t a) {
      auto it = tree.rank_info.find(a);
      inherited = it != tree.rank_info.end() && SameRank(it->second, info);
      return inherited;
    });
    if (inherited) continue;
    RankSummary r;
    r.info = info;
    r.pid = pid;
    by_pid.emplace(pid, std::move(r));
  }
  if (by_pid.size() > kMaxRanksAnalyzed) {
    std::vector<std::pair<int32_t, uint32_t>> order;
    for (const auto& [pid, r] : by_pid) order.emplace_back(RankNumber(r.info), pid);
    std::sort(order.begin(), order.end());
    for (size_t i = kMaxRanksAnalyzed; i < order.size(); ++i) by_pid.erase(order[i].second);
    *note = absl::StrFormat("%zu more ranks in the trace were left out of the analysis (at most %zu)",
                            order.size() - kMaxRanksAnalyzed, kMaxRanksAnalyzed);
  }
  return by_pid;
}

// Every process to the rank it belongs to (its nearest ancestor-or-self
// that is a rank process); fills each rank's pids and GPU.
absl::flat_hash_map<uint32_t, RankSummary*> AssignProcesses(const TreeScan& tree, RanksByPid& by_pid) {
  auto owner = [&](uint32_t pid) -> RankSummary* {
    if (auto it = by_pid.find(pid); it != by_pid.end()) return &it->second;
    RankSummary* found = nullptr;
    VisitAncestors(tree, pid, [&](uint32_t a) {
      auto it = by_pid.find(a);
      if (it != by_pid.end()) found = &it->second;
      return found != nullptr;
    });
    return found;
  };
  absl::flat_hash_map<uint32_t, RankSummary*> pid_rank;
  for (const auto& [pid, ppid] : tree.parent) {
    if (RankSummary* r = owner(pid)) pid_rank[pid] = r, r->pids.push_back(pid);
  }
  for (auto& [pid, r] : by_pid) {
    if (std::find(r.pids.begin(), r.pids.end(), pid) == r.pids.end()) r.pids.push_back(pid), pid_rank[pid] = &r;
    std::sort(r.pids.begin(), r.pids.end());
    for (uint32_t p : r.pids) {
      if (auto d = tree.min_device.find(p); d != tree.min_device.end()) {
        r.gpu = r.gpu ? std::min(*r.gpu, d->second) : d->second;
      }
    }
    if (!r.gpu && r.info.has_cuda_visible_devices()) {
      uint32_t first = 0;
      const std::string head(r.info.cuda_visible_devices().substr(0, r.info.cuda_visible_devices().find(',')));
      if (absl::SimpleAtoi(head, &first)) r.gpu = first;
    }
  }
  return pid_rank;
}

using CommunicationInputs = absl::flat_hash_map<RankSummary*, CommunicationInput>;

// Pass 2: the ranks' off-CPU intervals and kernels, for communication.
absl::Status CollectCommunicationInputs(const v1::TraceHeader& header, const EachEvent& each, RanksByPid& by_pid,
                                        const absl::flat_hash_map<uint32_t, RankSummary*>& pid_rank,
                                        CommunicationInputs* inputs) {
  const absl::flat_hash_set<int32_t> network = NetworkWaitSyscalls(header);
  for (auto& [pid, r] : by_pid) {
    CommunicationInput& in = (*inputs)[&r];
    in.network_syscalls = network;
    for (const auto& [p, other] : pid_rank) {
      if (other != &r) in.peer_pids.insert(p);
    }
  }
  return each([&](const v1::Event& e) {
    auto it = pid_rank.find(e.pid());
    if (it == pid_rank.end()) return;
    if (e.has_off_cpu()) {
      const v1::OffCpu& o = e.off_cpu();
      ThreadWait w;
      w.tid = e.tid();
      w.start_ns = e.ts_ns();
      w.end_ns = e.ts_ns() + o.duration_ns();
      w.syscall_nr = o.syscall_nr();
      w.waker_tid = o.woken_by_tid();
      w.waker_pid = o.waker_pid();
      w.blocked = o.voluntary();
      w.from_interrupt = o.waker_context_known() && o.woken_from_interrupt();
      (*inputs)[it->second].waits.push_back(w);
    } else if (e.has_gpu_kernel()) {
      (*inputs)[it->second].kernels.push_back(
          {e.ts_ns(), e.ts_ns() + e.gpu_kernel().duration_ns(), IsNcclKernel(e.gpu_kernel().name())});
    }
  });
}

// Each rank's own steps and diagnosis.
absl::Status AnalyzeRankSteps(const StepsOf& steps_of, RanksByPid& by_pid, CommunicationInputs& inputs,
                              std::string* read_error) {
  for (auto& [pid, r] : by_pid) {
    absl::flat_hash_set<uint32_t> pids(r.pids.begin(), r.pids.end());
    // Its communication threads are helpers, never the driving thread.
    const CommunicationThreads comm = ClassifyCommunicationThreads(inputs[&r]);
    auto steps = steps_of(pids, comm.comm);
    if (!steps.ok()) return steps.status();
    r.steps = std::move(*steps);
    if (!r.steps.read_error.empty() && read_error->empty()) *read_error = r.steps.read_error;
    r.diagnosis = Diagnose(r.steps);
    const GpuParts& g = r.steps.measured_total.gpu;
    r.has_gpu_work = g.kernel_ns + g.memcpy_ns + g.memset_ns > 0;
  }
  for (auto& [pid, r] : by_pid) inputs[&r].driving_tid = r.steps.tid;
  return absl::OkStatus();
}

// The rank's communication per step, summed over its measured steps.
void AnalyzeRankCommunication(const CommunicationInput& input, RankSummary& r) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  std::vector<bool> measured;
  const bool all = r.steps.summary_includes_warmup;
  for (const StepRecord& s : r.steps.steps) {
    spans.emplace_back(s.start_ns, s.end_ns);
    measured.push_back(all || !s.warmup);
  }
  r.comm = AnalyzeCommunication(input, spans);
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!measured[i]) continue;
    r.comm_ns += r.comm.steps[i].comm_ns;
    r.exposed_comm_ns += r.comm.steps[i].exposed_ns;
  }
}

// What the straggler rule compares of a rank, per measured step.
RankLoad LoadOf(const RankSummary& rank) {
  RankLoad load;
  load.rank = RankNumber(rank.info);
  load.pid = rank.pid;
  load.steps = rank.steps.measured_steps;
  load.steps_with_detail_only = rank.steps.steps_without_detail > 0;
  load.step_ns = rank.steps.duration_ns.mean;
  load.exposed_comm_ns = rank.PerStep(rank.exposed_comm_ns);
  auto per = [&rank](uint64_t v) { return static_cast<uint64_t>(rank.PerStep(v)); };
  const CpuParts& c = rank.steps.measured_total.cpu;
  load.cpu.data_wait_ns = per(c.data_wait_ns);
  load.cpu.sync_ns = per(c.sync_ns);
  load.cpu.copy_api_ns = per(c.copy_api_ns);
  load.cpu.launch_api_ns = per(c.launch_api_ns);
  load.cpu.other_cuda_api_ns = per(c.other_cuda_api_ns);
  load.cpu.other_ns = per(c.other_ns);
  load.data_stage_ns = rank.PerStep(rank.steps.measured_total.stages[static_cast<size_t>(Stage::kDataLoading)]);
  const OffCpuParts& o = rank.steps.measured_total.off_cpu;
  load.off_cpu.preempted_ns = per(o.preempted_ns);
  load.off_cpu.runqueue_ns = per(o.runqueue_ns);
  load.off_cpu.page_fault_ns = per(o.page_fault_ns);
  load.off_cpu.mmap_munmap_ns = per(o.mmap_munmap_ns);
  load.off_cpu.syscall_ns = per(o.syscall_ns);
  load.off_cpu.futex_ns = per(o.futex_ns);
  load.bottleneck = BottleneckKey(rank.diagnosis.primary.bottleneck);
  const bool all = rank.steps.summary_includes_warmup;
  for (size_t i = 0; i < rank.steps.steps.size() && i < rank.comm.steps.size(); ++i) {
    const StepRecord& s = rank.steps.steps[i];
    if (all || !s.warmup) load.step_waits.push_back({s.start_ns, rank.comm.steps[i].exposed_ns});
  }
  return load;
}

// Added to `note` when the ranks' step counts disagree where their steps
// were inferred (see RankAnalysis::note).
void NoteStepCountSpread(const RanksByPid& by_pid, std::string* note) {
  size_t fewest = SIZE_MAX, most = 0;
  bool inferred = false;
  for (const auto& [pid, r] : by_pid) {
    if (r.steps.measured_steps == 0) continue;
    fewest = std::min(fewest, r.steps.measured_steps);
    most = std::max(most, r.steps.measured_steps);
    inferred |= StepSourceIsInferred(r.steps.source);
  }
  if (!inferred || most == 0 || fewest >= (1 - kRankStepCountSpread) * most) return;
  if (!note->empty()) *note += "; ";
  *note += absl::StrFormat(
      "the ranks' step counts differ (%zu to %zu) where their steps were inferred from the work: in a "
      "synchronous job they take the same steps, so some were split or merged; per-step figures of those ranks "
      "are not reliable (mark the steps, e.g. launch under gpuos-trace for the Python hooks, or NVTX ranges)",
      fewest, most);
}

// Without ranks: the processes that trained on their own
// (training_processes.h), each a unit like a rank with no RankInfo.
// At most kMaxRanksAnalyzed, the lowest pids; `note` says how many more.
RanksByPid FindTrainingProcesses(const TreeScan& tree, std::string* note) {
  RanksByPid by_pid;
  const std::vector<uint32_t> pids = tree.training.TrainingProcesses();
  for (size_t i = 0; i < pids.size() && i < kMaxRanksAnalyzed; ++i) by_pid[pids[i]].pid = pids[i];
  if (pids.size() > kMaxRanksAnalyzed) {
    *note = absl::StrFormat("%zu more training processes in the trace were left out of the analysis (at most %zu)",
                            pids.size() - kMaxRanksAnalyzed, kMaxRanksAnalyzed);
  }
  return by_pid;
}

absl::StatusOr<RankAnalysis> Analyze(const v1::TraceHeader& header, const EachEvent& each, const StepsOf& steps_of) {
  RankAnalysis out;
  TreeScan tree;
  if (absl::Status s = each([&](const v1::Event& e) { tree.Add(e); }); !s.ok()) out.read_error = std::string(s.message());
  const bool ranks = !tree.rank_info.empty();
  RanksByPid by_pid = ranks ? FindRankProcesses(tree, &out.note) : FindTrainingProcesses(tree, &out.note);
  if (by_pid.empty()) return out;
  const absl::flat_hash_map<uint32_t, RankSummary*> pid_rank = AssignProcesses(tree, by_pid);
  CommunicationInputs inputs;
  absl::Status read = CollectCommunicationInputs(header, each, by_pid, pid_rank, &inputs);
  if (!read.ok() && out.read_error.empty()) out.read_error = std::string(read.message());
  if (absl::Status s = AnalyzeRankSteps(steps_of, by_pid, inputs, &out.read_error); !s.ok()) return s;

  std::vector<RankLoad> loads;
  for (auto& [pid, r] : by_pid) {
    AnalyzeRankCommunication(inputs[&r], r);
    loads.push_back(LoadOf(r));
  }
  if (!ranks) {
    // Processes the trace does not name as ranks: which waits for which in
    // a collective cannot be told, and hogwild's processes wait for none.
    // They ran collectives when NCCL's kernels ran in their steps, or when
    // at least two spent kMinCollectiveShare of their steps in collectives
    // (gloo's waits; communication.h): comm threads alone tell nothing here
    // (CUDA's event thread waits in poll, woken from interrupts).
    size_t communicating = 0;
    for (auto& [pid, r] : by_pid) {
      communicating += r.steps.duration_ns.mean > 0 &&
                       r.PerStep(r.comm_ns) >= kMinCollectiveShare * r.steps.duration_ns.mean;
      out.training_processes_communicate |= r.steps.measured_total.gpu.comm_kernel_ns > 0;
    }
    out.training_processes_communicate |= communicating >= 2;
    for (auto& [pid, r] : by_pid) out.training_processes.push_back(std::move(r));
    out.straggler_not_judged = "the trace names no ranks";
    return out;
  }
  out.straggler_not_judged = StragglerNotJudged(loads);
  out.straggler = FindStraggler(loads, &out.straggler_turns);
  NoteStepCountSpread(by_pid, &out.note);

  for (auto& [pid, r] : by_pid) out.ranks.push_back(std::move(r));
  std::stable_sort(out.ranks.begin(), out.ranks.end(), [](const RankSummary& a, const RankSummary& b) {
    if (a.info.host() != b.info.host()) return a.info.host() < b.info.host();
    return RankNumber(a.info) < RankNumber(b.info);
  });
  return out;
}

}  // namespace

absl::StatusOr<RankAnalysis> AnalyzeRanks(const std::string& path, const StepOptions& options) {
  auto reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  const v1::TraceHeader header = (*reader)->header();
  EachEvent each = [&](const std::function<void(const v1::Event&)>& on_event) -> absl::Status {
    auto again = TraceReader::Open(path);
    if (!again.ok()) return again.status();
    return ForEachEvent(**again, on_event);
  };
  StepsOf steps_of = [&](const absl::flat_hash_set<uint32_t>& pids, const absl::flat_hash_set<uint32_t>& helpers) {
    return AnalyzeStepsOfProcesses(path, options, pids, helpers);
  };
  return Analyze(header, each, steps_of);
}

absl::StatusOr<RankAnalysis> AnalyzeRankEvents(const v1::TraceHeader& header, const std::vector<v1::Event>& events,
                                               const StepOptions& options) {
  EachEvent each = [&](const std::function<void(const v1::Event&)>& on_event) -> absl::Status {
    for (const v1::Event& e : events) on_event(e);
    return absl::OkStatus();
  };
  StepsOf steps_of = [&](const absl::flat_hash_set<uint32_t>& pids, const absl::flat_hash_set<uint32_t>& helpers) {
    std::vector<v1::Event> kept;
    for (const v1::Event& e : events) {
      if (e.pid() == 0 || pids.contains(e.pid())) kept.push_back(e);
    }
    return AnalyzeStepEvents(header, kept, options, nullptr, helpers);
  };
  return Analyze(header, each, steps_of);
}

}  // namespace gpuos
