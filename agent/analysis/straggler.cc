// The straggler rule; see straggler.h.
#include "analysis/straggler.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_format.h"

namespace gpuos {
namespace {

enum Part { kData, kSync, kCopy, kLaunch, kOtherCuda, kOther, kParts };

// The training thread's futex waits per step, less the collectives' waits
// taken out of "other" (gloo's are futex waits).
double FutexWaits(const RankLoad& r) {
  const double from_other = std::min(r.exposed_comm_ns, static_cast<double>(r.cpu.other_ns));
  return std::max(0.0, static_cast<double>(r.off_cpu.futex_ns) - from_other);
}

// How much longer ranks[0]'s training thread waited in futex per step than
// the others' mean.
double FutexExcess(const std::vector<RankLoad>& ranks) {
  double theirs = 0;
  for (size_t i = 1; i < ranks.size(); ++i) {
    theirs += FutexWaits(ranks[i]) / (ranks.size() - 1);
  }
  return FutexWaits(ranks[0]) - theirs;
}

std::array<double, kParts> Parts(const RankLoad& r) {
  std::array<double, kParts> p = {static_cast<double>(r.cpu.data_wait_ns), static_cast<double>(r.cpu.sync_ns),
                                  static_cast<double>(r.cpu.copy_api_ns),   static_cast<double>(r.cpu.launch_api_ns),
                                  static_cast<double>(r.cpu.other_cuda_api_ns), static_cast<double>(r.cpu.other_ns)};
  // Waits for data the chains found in its own code count as data.
  const double chained_data = std::min(p[kOther], std::max(0.0, r.data_stage_ns - p[kData]));
  p[kData] += chained_data;
  p[kOther] -= chained_data;
  // Its waits for the collectives: out of "other" (gloo), then sync (NCCL).
  double comm = r.exposed_comm_ns;
  const double from_other = std::min(comm, p[kOther]);
  p[kOther] -= from_other;
  comm -= from_other;
  p[kSync] = std::max(0.0, p[kSync] - comm);
  return p;
}

std::array<double, 4> OsParts(const OffCpuParts& p) {
  return {static_cast<double>(p.preempted_ns + p.runqueue_ns), static_cast<double>(p.page_fault_ns),
          static_cast<double>(p.mmap_munmap_ns), static_cast<double>(p.syscall_ns)};
}

struct Cause {
  const char* key;
  const char* words;
};

constexpr Cause kPartCauses[kParts] = {
    {"data_loader", "time in data fetches (waiting for batches or preparing them)"},
    {"gpu_wait", "time waiting for its GPU (synchronize calls)"},
    {"transfer", "time in CUDA copy calls"},
    {"kernel_dispatch", "time in kernel launch calls"},
    {"cuda_api", "time in other CUDA calls"},
    {"cpu_work", "time in the training loop's own code (outside data fetches and CUDA calls)"},
};
constexpr Cause kOsCauses[4] = {{"preemption", "preemption and run-queue waits of its training thread"},
                                {"page_faults", "page faults of its training thread"},
                                {"mmap_munmap", "mmap/munmap calls of its training thread"},
                                {"blocking_syscalls", "blocking syscalls of its training thread"}};
// The loop's own code, where the training thread was not running it but
// waiting (futex) for its process's other threads or a lock: the autograd
// engine, the pin-memory thread, the job's pools, Python's GIL.
constexpr Cause kThreadWaits = {"thread_waits",
                                "time blocked in the training loop's own code, waiting (futex) for its other "
                                "threads or a lock (autograd engine, pin-memory thread, the GIL)"};

// Every per-step figure of `r` times `scale`.
void Rescale(double scale, RankLoad& r) {
  auto rescale = [&](uint64_t& v) { v = static_cast<uint64_t>(v * scale); };
  r.exposed_comm_ns *= scale;
  r.data_stage_ns *= scale;
  rescale(r.cpu.data_wait_ns), rescale(r.cpu.sync_ns), rescale(r.cpu.copy_api_ns), rescale(r.cpu.launch_api_ns);
  rescale(r.cpu.other_cuda_api_ns), rescale(r.cpu.other_ns);
  rescale(r.off_cpu.preempted_ns), rescale(r.off_cpu.runqueue_ns), rescale(r.off_cpu.page_fault_ns);
  rescale(r.off_cpu.mmap_munmap_ns), rescale(r.off_cpu.syscall_ns), rescale(r.off_cpu.futex_ns);
}

// In how many parts of the run `low` waited least, and in how many parts
// every rank had steps (see the header); {0, 0} when there are too few
// steps to tell parts apart.
std::pair<size_t, size_t> PartsLowest(const std::vector<RankLoad>& ranks, const RankLoad& low) {
  const std::vector<RankStepWait>& mine = low.step_waits;
  uint64_t from = 0, to = UINT64_MAX;
  for (const RankLoad& r : ranks) {
    if (r.step_waits.empty()) return {0, 0};
    from = std::max(from, r.step_waits.front().start_ns);
    to = std::min(to, r.step_waits.back().start_ns + 1);
  }
  size_t inside = 0;
  for (const RankStepWait& w : mine) inside += w.start_ns >= from && w.start_ns < to;
  const size_t parts = std::min(kStragglerParts, inside / kStragglerMinSteps);
  if (parts < 3) return {0, 0};
  size_t judged = 0, lowest = 0;
  for (size_t p = 0; p < parts; ++p) {
    const uint64_t a = from + (to - from) * p / parts, b = from + (to - from) * (p + 1) / parts;
    // Each rank's mean exposed communication there, as a share of its step.
    std::vector<double> share;
    for (const RankLoad& r : ranks) {
      double sum = 0;
      size_t n = 0;
      for (const RankStepWait& w : r.step_waits) {
        if (w.start_ns >= a && w.start_ns < b) sum += static_cast<double>(w.exposed_comm_ns), ++n;
      }
      if (n == 0) break;
      share.push_back(sum / static_cast<double>(n) / r.step_ns);
    }
    if (share.size() != ranks.size()) continue;
    ++judged;
    lowest += std::min_element(share.begin(), share.end()) - share.begin() == 0;
  }
  return {lowest, judged};
}

// The part where `mine` exceeds `theirs` most, and by how much ({N, 0}
// where it exceeds none).
template <size_t N>
std::pair<size_t, double> LargestExcess(const std::array<double, N>& mine, const std::array<double, N>& theirs) {
  size_t best = N;
  double excess = 0;
  for (size_t k = 0; k < N; ++k) {
    if (mine[k] - theirs[k] > excess) excess = mine[k] - theirs[k], best = k;
  }
  return {best, excess};
}

// Why the ranks[0], which the others waited `cost` for on average, is no
// straggler because the ranks took turns (see the header), or empty.
std::string TookTurns(const std::vector<RankLoad>& ranks, double cost) {
  const RankLoad& low = ranks[0];
  const auto [lowest, judged] = PartsLowest(ranks, low);
  if (judged == 0 || static_cast<double>(lowest) >= kStragglerMinPartShare * static_cast<double>(judged)) return "";
  return absl::StrFormat(
      "the ranks took turns: the others waited %.3f ms per step more than rank %d over the run, but rank %d "
      "waited least in only %zu of %zu parts of it (%.0f%% wanted), so no single rank held the others back",
      cost / 1e6, low.rank, low.rank, lowest, judged, 100 * kStragglerMinPartShare);
}

}  // namespace

std::string StragglerNotJudged(const std::vector<RankLoad>& ranks) {
  size_t with_steps = 0;
  const RankLoad* fewest = nullptr;
  for (const RankLoad& r : ranks) {
    if (r.steps == 0) continue;
    ++with_steps;
    if (fewest == nullptr || r.steps < fewest->steps) fewest = &r;
  }
  if (with_steps < 2) {
    return "it takes two ranks with steps in the trace; trace every rank, e.g. --pid on the launcher";
  }
  if (fewest->steps >= kStragglerMinSteps) return "";
  return absl::StrFormat("rank %d has %zu measured steps%s; it takes %zu of every rank's%s", fewest->rank,
                         fewest->steps, fewest->steps_with_detail_only ? " with CUDA detail" : "",
                         kStragglerMinSteps,
                         fewest->steps_with_detail_only ? " (longer or more capture windows)" : "");
}

std::optional<Straggler> FindStraggler(const std::vector<RankLoad>& all, std::string* turns) {
  if (!StragglerNotJudged(all).empty()) return std::nullopt;
  // Every per-step figure as a share of the rank's own mean step, then in
  // ns of the straggler's step: in a synchronous job every rank's true step
  // is the same, and a rank whose inferred steps were split in two keeps
  // its shares (its per-step figures would halve).
  std::vector<RankLoad> ranks;
  for (const RankLoad& r : all) {
    if (r.steps > 0 && r.step_ns > 0) ranks.push_back(r);
  }
  if (ranks.size() < 2) return std::nullopt;
  std::sort(ranks.begin(), ranks.end(), [](const RankLoad& a, const RankLoad& b) {
    return a.exposed_comm_ns / a.step_ns < b.exposed_comm_ns / b.step_ns;
  });
  const double ref = ranks[0].step_ns;
  for (RankLoad& r : ranks) Rescale(ref / r.step_ns, r);
  const RankLoad& low = ranks[0];
  double others_comm = 0;
  for (size_t i = 1; i < ranks.size(); ++i) others_comm += ranks[i].exposed_comm_ns / (ranks.size() - 1);
  const double threshold = std::max<double>(kStragglerMinNs, kStragglerMinShare * ref);
  const double cost = others_comm - low.exposed_comm_ns;
  if (cost < threshold || ranks[1].exposed_comm_ns - low.exposed_comm_ns < threshold) return std::nullopt;
  if (std::string why = TookTurns(ranks, cost); !why.empty()) {
    if (turns != nullptr) *turns = std::move(why);
    return std::nullopt;
  }

  Straggler s;
  s.rank = low.rank;
  s.pid = low.pid;
  s.cost_ns_per_step = static_cast<uint64_t>(cost);
  s.bottleneck = low.bottleneck;
  s.others_step_ns = ref;
  const auto mine = Parts(low);
  std::array<double, kParts> theirs{};
  const auto my_os = OsParts(low.off_cpu);
  std::array<double, 4> their_os{};
  for (size_t i = 1; i < ranks.size(); ++i) {
    const auto p = Parts(ranks[i]);
    for (size_t k = 0; k < kParts; ++k) theirs[k] += p[k] / (ranks.size() - 1);
    const auto o = OsParts(ranks[i].off_cpu);
    for (size_t k = 0; k < 4; ++k) their_os[k] += o[k] / (ranks.size() - 1);
  }
  const auto [best, best_excess] = LargestExcess(mine, theirs);
  if (best == kParts || best_excess < kStragglerCauseShare * cost) {
    s.cause = "unknown";
    s.cause_detail = absl::StrFormat(
        "no part of rank %d's step exceeds the other ranks' by %.0f%% of the %.3f ms they waited for it", s.rank,
        kStragglerCauseShare * 100, cost / 1e6);
    return s;
  }
  s.excess_ns_per_step = static_cast<uint64_t>(best_excess);
  const auto [os_best, os_excess] = LargestExcess(my_os, their_os);
  Cause cause = kPartCauses[best];
  // The loop's own code, unless the thread ran it hardly longer than the
  // others and the rest of the excess is its OS cost, or its waits for its
  // own threads.
  const double futex_excess = FutexExcess(ranks);
  if (best == kOther && os_best < 4 && best_excess - os_excess < kStragglerCauseShare * cost) {
    cause = kOsCauses[os_best];
  } else if (best == kOther && futex_excess > 0 && best_excess - futex_excess < kStragglerCauseShare * cost) {
    cause = kThreadWaits;
  }
  s.cause = cause.key;
  s.cause_detail = absl::StrFormat(
      "rank %d's %s took %.3f ms per step more than the other ranks' mean; they waited %.3f ms per step for it in "
      "collectives",
      s.rank, cause.words, best_excess / 1e6, cost / 1e6);
  if (os_best < 4 && os_excess > 0 && cause.key != kOsCauses[os_best].key) {
    absl::StrAppendFormat(&s.cause_detail, "; its %s exceeded the others' by %.3f ms per step", kOsCauses[os_best].words,
                          os_excess / 1e6);
  }
  return s;
}

}  // namespace gpuos
