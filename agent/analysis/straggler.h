// The straggler of a distributed job: the rank the others waited for.
// In a synchronous job (DDP, FSDP, any collective per step) every rank
// takes as long per step as the slowest; what tells the slowest apart is
// that it waits least in collectives, since the others wait there for it.
// So the straggler is the rank with the least exposed communication per
// step (communication.h; compared as shares of each rank's own mean step
// and told in ns of the straggler's step, since a rank's inferred steps
// may be split or merged while its shares hold), named only when
//   - at least two ranks have measured steps, and every rank with steps
//     has at least kStragglerMinSteps (in a trace with capture windows,
//     steps with CUDA detail: from a window's two steps, one of them its
//     opening, per-rank waits say nothing; StragglerNotJudged says why),
//   - the others' mean exposed communication exceeds its own by at least
//     max(kStragglerMinNs, kStragglerMinShare of the mean step): that
//     excess, the time the others waited for it, is cost_ns_per_step,
//   - and the next-lowest rank waits at least as much more as well (with
//     two stragglers neither is named: "no single straggler");
//   - and it held the others back for most of the run, not in turns: the
//     span its measured steps share with the others' is cut into up to
//     kStragglerParts parts of at least kStragglerMinSteps of its steps
//     each (at least 3 parts, else this is not checked), and it must wait
//     least in at least kStragglerMinPartShare of the parts where every
//     rank has steps.  Ranks whose lateness moves from one to another over
//     the run (phases of a data pipeline, of the machine) hold no single
//     rank responsible: none is named, and why is said.
// Its cause is what it did with that time: the part of its training
// thread's step (CpuParts, step_breakdown.h: in data fetches, in CUDA
// launch / copy / sync / other calls, or else running the loop's own code
// or off the CPU there) that exceeds the other ranks' mean by most, each
// rank's exposed communication taken out of its "other" part first (where
// a CPU collective's wait lands), then out of its sync part (where an NCCL
// wait does).  A part measures where the thread was, on the CPU or not,
// so a data fetch that was preempted is still the data loader's; the
// detail says how much of the excess was preemption.  When the excess is
// in "other" and, that OS excess (preemption, page faults, mmap/munmap,
// blocking syscalls) taken out, less than kStragglerCauseShare of the cost
// is left (the thread hardly ran its code longer than the others), the
// cause is that OS cost.  When no part exceeds the others' by
// kStragglerCauseShare of the cost, the cause is "unknown".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/step_breakdown.h"

namespace gpuos {

inline constexpr uint64_t kStragglerMinNs = 1'000'000;
inline constexpr double kStragglerMinShare = 0.10;
inline constexpr double kStragglerCauseShare = 0.25;
inline constexpr size_t kStragglerMinSteps = 5;
inline constexpr size_t kStragglerParts = 10;
inline constexpr double kStragglerMinPartShare = 2.0 / 3;

// One measured step of a rank: when it began and its exposed
// communication.
struct RankStepWait {
  uint64_t start_ns = 0;
  uint64_t exposed_comm_ns = 0;
};

// What the rule reads of one rank, per measured step (means).
struct RankLoad {
  int32_t rank = -1;
  uint32_t pid = 0;
  size_t steps = 0;
  bool steps_with_detail_only = false;  // a trace with capture windows
  double step_ns = 0;
  double exposed_comm_ns = 0;
  CpuParts cpu;         // of the driving thread, per step (means, rounded)
  // Its data-loading stage per step: also the waits for data in its own
  // code that the wakeup chains name (a loop with no fetch marks, as when
  // attached), which `cpu` counts as other_ns.
  double data_stage_ns = 0;
  OffCpuParts off_cpu;  // of the driving thread, per step (means, rounded)
  std::string bottleneck;  // its own diagnosis's primary finding (key)
  std::vector<RankStepWait> step_waits;  // its measured steps, in time order (empty: not checked for turns)
};

struct Straggler {
  int32_t rank = -1;
  uint32_t pid = 0;
  // data_loader, cpu_work, thread_waits, kernel_dispatch, gpu_wait,
  // transfer, cuda_api, preemption, page_faults, mmap_munmap,
  // blocking_syscalls, unknown.
  std::string cause;
  std::string cause_detail;  // one sentence with the numbers
  uint64_t cost_ns_per_step = 0;
  uint64_t excess_ns_per_step = 0;  // of the cause's part, over the others' mean
  std::string bottleneck;  // its own diagnosis's primary finding (key)
  // The step the figures are in: the straggler's mean step (in a
  // synchronous job every rank's).
  double others_step_ns = 0;
};

// Why no straggler can be judged from `ranks` (one sentence), or empty
// when one can: fewer than two ranks with steps, or a rank with steps but
// fewer than kStragglerMinSteps.
std::string StragglerNotJudged(const std::vector<RankLoad>& ranks);

// Null when there is no single straggler or it cannot be judged; then,
// where a rank would be named but the ranks took turns, `turns` (when
// given) says so with the numbers.
std::optional<Straggler> FindStraggler(const std::vector<RankLoad>& ranks, std::string* turns = nullptr);

}  // namespace gpuos
