// `gpuos-trace merge`: joins traces of one job recorded on several hosts into
// one trace on the first host's clock.  Each input's skew comes from the
// hosts' monotonic/realtime pairs, refined from NCCL allreduce kernels when
// both hosts have them, else from CPU collectives (gloo) when the caller
// can find them (clock_alignment.h); ids are namespaced per host so
// two hosts' pid 4242 stay two processes.  The merge streams: one batch per
// input in memory, events interleaved by timestamp (each input's own order
// is kept; a trace is written in arrival order, which is time order only
// roughly, and consumers do not rely on more).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuos_trace.pb.h"
#include "stream/clock_alignment.h"

namespace gpuos {

// Input i's ids become i * kMergedPidStride + id (pid_max is at most 2^22,
// and the exporters' made-up ids start at 2^30, hence at most 100 inputs).
inline constexpr uint32_t kMergedPidStride = 10'000'000;
inline constexpr size_t kMaxMergedInputs = 100;

uint32_t NamespacedId(uint32_t id, size_t host_index);

struct MergeResult {
  std::vector<v1::MergedHost> hosts;
  uint64_t events = 0;
  // Inputs that were damaged or had no trailer (the merged trace then has
  // no trailer either, so it reads as incomplete).
  std::vector<std::string> warnings;
};

struct MergeOptions {
  // The ends of the CPU collectives in one input, per step of one of its
  // ranks (the analysis finds them: analysis/cpu_collectives.h, a layer
  // above this one).  Asked only for inputs whose skew NCCL kernels did not
  // refine, and for the first input then (each costs the rank analysis's
  // passes over that file); an error or no ends leaves the wall-clock
  // estimate.  Unset: not used.
  std::function<absl::StatusOr<std::vector<StepCollectiveEnds>>(const std::string& path)> cpu_collectives;
};

// Fails (InvalidArgument, one line) for fewer than two inputs, an input
// that cannot be opened or is not a trace, or output equal to an input.
absl::StatusOr<MergeResult> MergeTraces(const std::vector<std::string>& inputs, const std::string& output,
                                        const MergeOptions& options = {});

// The end times of one series of NCCL allreduce kernels in a trace (the
// process and device with the most), in that host's clock: the collectives
// the merge refines skews from.
absl::StatusOr<std::vector<uint64_t>> AllreduceKernelEnds(const std::string& path);

}  // namespace gpuos
