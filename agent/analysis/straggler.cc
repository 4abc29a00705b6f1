// The straggler rule; see straggler.h.
#include "analysis/straggler.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gpuos {
namespace {

struct Cause {
  const char* key;
  const char* words;  // "its data loading"
};

Cause CauseOfStage(Stage stage) {
  switch (stage) {
    case Stage::kDataLoading: return {"data_loader", "data loading (waiting for batches or preparing them)"};
    case Stage::kTransfer: return {"transfer", "CPU<->GPU transfers"};
    case Stage::kDispatch: return {"kernel_dispatch", "kernel dispatch (launch calls, backward)"};
    case Stage::kGpuCompute: return {"gpu_compute", "GPU compute"};
    case Stage::kOsOverhead: return {"os_overhead", "OS overhead"};
    case Stage::kOther:
    case Stage::kCount: break;
  }
  return {"cpu_work", "CPU work of the training loop outside data fetches and CUDA calls"};
}

}  // namespace

std::optional<Straggler> FindStraggler(const std::vector<RankLoad>& all) {
  std::vector<const RankLoad*> ranks;
  for (const RankLoad& r : all) {
    if (r.steps >= 2) ranks.push_back(&r);
  }
  if (ranks.size() < 2) return std::nullopt;
  std::sort(ranks.begin(), ranks.end(),
            [](const RankLoad* a, const RankLoad* b) { return a->exposed_comm_ns < b->exposed_comm_ns; });
  const RankLoad& low = *ranks[0];
  double others_comm = 0, others_step = 0, mean_step = 0;
  for (const RankLoad* r : ranks) mean_step += r->step_ns / ranks.size();
  for (size_t i = 1; i < ranks.size(); ++i) {
    others_comm += ranks[i]->exposed_comm_ns / (ranks.size() - 1);
    others_step += ranks[i]->step_ns / (ranks.size() - 1);
  }
  const double threshold = std::max<double>(kStragglerMinNs, kStragglerMinShare * mean_step);
  const double cost = others_comm - low.exposed_comm_ns;
  if (cost < threshold || ranks[1]->exposed_comm_ns - low.exposed_comm_ns < threshold) return std::nullopt;

  Straggler s;
  s.rank = low.rank;
  s.pid = low.pid;
  s.cost_ns_per_step = static_cast<uint64_t>(cost);
  s.bottleneck = low.bottleneck;
  s.others_step_ns = others_step;
  // Each rank's stages with its waits for the collectives taken out.
  auto stages_of = [](const RankLoad& r) {
    std::array<double, kStageCount> st = r.stage_ns;
    double& other = st[static_cast<size_t>(Stage::kOther)];
    other = std::max(0.0, other - r.exposed_comm_ns);
    return st;
  };
  const std::array<double, kStageCount> mine = stages_of(low);
  std::array<double, kStageCount> theirs{};
  for (size_t i = 1; i < ranks.size(); ++i) {
    const auto st = stages_of(*ranks[i]);
    for (size_t k = 0; k < kStageCount; ++k) theirs[k] += st[k] / (ranks.size() - 1);
  }
  size_t best = kStageCount;
  double best_excess = 0;
  for (size_t k = 0; k < kStageCount; ++k) {
    const double excess = mine[k] - theirs[k];
    if (excess > best_excess) best_excess = excess, best = k;
  }
  if (best == kStageCount || best_excess < kStragglerCauseShare * cost) {
    s.cause = "unknown";
    s.cause_detail = absl::StrFormat(
        "no stage of rank %d's step exceeds the other ranks' by %.0f%% of the %.3f ms they waited for it",
        s.rank, kStragglerCauseShare * 100, cost / 1e6);
    return s;
  }
  s.excess_ns_per_step = static_cast<uint64_t>(best_excess);
  Cause cause = CauseOfStage(static_cast<Stage>(best));
  std::string words = cause.words;
  if (static_cast<Stage>(best) == Stage::kOsOverhead) {
    // Which part of the OS overhead: the driving thread's off-CPU parts
    // against the others' mean.
    auto parts = [](const OffCpuParts& p) {
      return std::array<double, 4>{static_cast<double>(p.preempted_ns + p.runqueue_ns),
                                   static_cast<double>(p.page_fault_ns), static_cast<double>(p.mmap_munmap_ns),
                                   static_cast<double>(p.syscall_ns)};
    };
    const auto m = parts(low.off_cpu);
    std::array<double, 4> t{};
    for (size_t i = 1; i < ranks.size(); ++i) {
      const auto p = parts(ranks[i]->off_cpu);
      for (size_t k = 0; k < 4; ++k) t[k] += p[k] / (ranks.size() - 1);
    }
    static const Cause kOs[4] = {{"preemption", "preemption and run-queue waits of its training thread"},
                                 {"page_faults", "page faults of its training thread"},
                                 {"mmap_munmap", "mmap/munmap calls of its training thread"},
                                 {"blocking_syscalls", "blocking syscalls of its training thread"}};
    size_t os_best = 4;
    double os_excess = 0;
    for (size_t k = 0; k < 4; ++k) {
      if (m[k] - t[k] > os_excess) os_excess = m[k] - t[k], os_best = k;
    }
    if (os_best < 4) cause = kOs[os_best], words = kOs[os_best].words;
  }
  s.cause = cause.key;
  s.cause_detail = absl::StrFormat(
      "rank %d's %s took %.3f ms per step more than the other ranks' mean; they waited %.3f ms per step "
      "for it in collectives",
      s.rank, words, best_excess / 1e6, cost / 1e6);
  return s;
}

}  // namespace gpuos
