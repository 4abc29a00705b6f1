// Training steps from the rhythm of one thread's CUDA API calls, for traces
// with no step annotations (an attached job, a script without NVTX): a
// training loop makes some call once per step (loss.item()'s device-to-host
// copy, a stream synchronize, the batch's host-to-device copy, a graph
// launch), so that call's times mark step boundaries when they recur at
// near-constant intervals.
//
// The rule, per API name (CUPTI's version and per-thread-stream suffixes
// stripped, so "cuMemcpyHtoDAsync_v2" and "cuMemcpyHtoDAsync" are one name):
//   - the times are the ends of its calls (a synchronizing call's wait
//     belongs to the step it finishes), sorted; intervals between neighbours;
//   - the longest rhythm_excused_fraction (10%) of intervals are set aside
//     as pauses (an evaluation pass, a checkpoint, a stall), never the
//     shortest: a name that comes twice in some steps makes short
//     intervals, which are not excused;
//   - regular when it has >= rhythm_min_calls calls, the mean of the kept
//     intervals is >= rhythm_min_interval_ns and their coefficient of
//     variation (population standard deviation / mean) is <= rhythm_max_cv.
// This rejects per-kernel names (microsecond spacing) and per-step names
// that come twice a step (alternating short/long spacing: CV near 1).
// Among regular names the one with the most calls wins, because a name that
// recurs every k steps (logging, a periodic sync) is regular too, and the
// finest regular rhythm is the step; ties go to the lower CV, then to a
// synchronizing call over a copy over anything else, then to the name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/step_options.h"

namespace gpuos {

enum class RhythmVerdict : uint8_t {
  kRegular,
  kTooFewCalls,  // fewer than rhythm_min_calls
  kTooDense,     // mean kept interval below rhythm_min_interval_ns
  kIrregular,    // CV above rhythm_max_cv
};

// One API name's rhythm on one thread.
struct RhythmCandidate {
  std::string name;  // suffixes stripped
  uint64_t calls = 0;
  double mean_interval_ns = 0;  // over the kept intervals
  double cv = 0;                // of the kept intervals
  uint64_t intervals = 0;       // calls - 1
  uint64_t excused = 0;         // longest intervals set aside as pauses
  RhythmVerdict verdict = RhythmVerdict::kTooFewCalls;
  bool regular() const { return verdict == RhythmVerdict::kRegular; }
  // Why it is not regular ("4 calls < 5", "mean interval 0.020 ms < 1 ms",
  // "CV 0.98 > 0.25"); empty when regular.
  std::string why_not;
  // Sorted call ends.  ApiRhythm::Choose keeps them for the chosen name
  // only.
  std::vector<uint64_t> times;
};

struct RhythmChoice {
  // Every name with calls, the chosen one first, then regular ones in order
  // of preference, then the rest by calls.
  std::vector<RhythmCandidate> candidates;
  bool found() const { return !candidates.empty() && candidates.front().regular(); }
  const RhythmCandidate& anchor() const { return candidates.front(); }
  // The irregular candidate closest to qualifying (enough calls and spacing,
  // the lowest CV; else the one with the most calls), for a note; null when
  // there were no calls at all.
  const RhythmCandidate* closest_irregular() const;
};

// The CUDA API calls of one thread, by name.
class ApiRhythm {
 public:
  explicit ApiRhythm(const StepOptions& options) : options_(options) {}

  // A call ending at `end_ns`.  Memory: 8 bytes a call, except that a name
  // whose first 4096 or more calls average less than rhythm_min_interval_ns
  // apart (kernel launches, per-layer calls) stops keeping times: thousands
  // of short intervals rule it out whatever follows.
  void Add(std::string_view name, uint64_t end_ns);

  uint64_t calls() const { return calls_; }
  RhythmChoice Choose() const;

 private:
  struct Times {
    uint64_t calls = 0;
    uint64_t min_ns = UINT64_MAX;
    uint64_t max_ns = 0;
    bool dense = false;
    std::vector<uint64_t> ends;
  };
  StepOptions options_;
  uint64_t calls_ = 0;
  absl::flat_hash_map<std::string, Times> by_name_;
};

// The rule above applied to one name's call ends (any order).
RhythmCandidate MeasureRhythm(std::string name, std::vector<uint64_t> ends, const StepOptions& options);

}  // namespace gpuos
