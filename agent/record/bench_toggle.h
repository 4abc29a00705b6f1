// A benchmark knob: GPUOS_BENCH_TOGGLE=PERIOD_MS:LOG takes the attached
// processes out of the traced set and puts them back every PERIOD_MS
// (bench/phase_overhead.py --toggle-ms), writing "on NS" / "off NS"
// (CLOCK_MONOTONIC) to LOG at each flip.  The programs stay attached, so a
// job's step rate in its "on" and "off" spans of one recording gives what
// recording its events costs it, alternating fast enough that the host's
// drift cancels.  Only the attached processes themselves flip: children
// they fork stay traced throughout.  Not for traces anyone reads: events
// that span a flip are cut or lost.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

namespace gpuos {

class BpfSession;

class BenchToggle {
 public:
  // Null when the knob is unset; a bad value is reported on stderr and
  // ignored (the recording goes on untoggled).
  static std::unique_ptr<BenchToggle> FromEnvironment(const std::vector<int>& pids);
  ~BenchToggle();

  // Flips the pids when a period has passed since the last flip.
  void Tick(BpfSession& bpf, uint64_t now_ns);

 private:
  BenchToggle(std::vector<int> pids, uint64_t period_ns, FILE* log)
      : pids_(std::move(pids)), period_ns_(period_ns), log_(log) {}
  std::vector<int> pids_;
  uint64_t period_ns_;
  FILE* log_;
  uint64_t last_flip_ns_ = 0;
  bool tracked_ = true;
};

}  // namespace gpuos
