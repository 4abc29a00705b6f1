#include "record/bench_toggle.h"

#include <cinttypes>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "record/bpf_session.h"

namespace gpuos {

std::unique_ptr<BenchToggle> BenchToggle::FromEnvironment(const std::vector<int>& pids) {
  const char* value = getenv("GPUOS_BENCH_TOGGLE");
  if (!value) return nullptr;
  std::pair<std::string, std::string> parts = absl::StrSplit(value, absl::MaxSplits(':', 1));
  uint64_t period_ms = 0;
  if (!absl::SimpleAtoi(parts.first, &period_ms) || period_ms == 0 || parts.second.empty() || pids.empty()) {
    fprintf(stderr, "gpuos-trace: warning: GPUOS_BENCH_TOGGLE wants PERIOD_MS:LOG and --pid; ignored\n");
    return nullptr;
  }
  FILE* log = fopen(parts.second.c_str(), "w");
  if (!log) {
    fprintf(stderr, "gpuos-trace: warning: GPUOS_BENCH_TOGGLE: cannot write %s; ignored\n", parts.second.c_str());
    return nullptr;
  }
  fprintf(stderr, "gpuos-trace: warning: GPUOS_BENCH_TOGGLE: the traced processes go in and out of the trace "
                  "every %" PRIu64 " ms; events are missing\n", period_ms);
  return std::unique_ptr<BenchToggle>(new BenchToggle(pids, period_ms * 1'000'000, log));
}

BenchToggle::~BenchToggle() { fclose(log_); }

void BenchToggle::Tick(BpfSession& bpf, uint64_t now_ns) {
  if (last_flip_ns_ == 0) {
    last_flip_ns_ = now_ns;
    fprintf(log_, "on %" PRIu64 "\n", now_ns);
    return;
  }
  if (now_ns - last_flip_ns_ < period_ns_) return;
  tracked_ = !tracked_;
  for (int pid : pids_) {
    if (tracked_) {
      (void)bpf.Track(pid);
    } else {
      bpf.Untrack(pid);
    }
  }
  last_flip_ns_ = now_ns;
  fprintf(log_, "%s %" PRIu64 "\n", tracked_ ? "on" : "off", now_ns);
  fflush(log_);
}

}  // namespace gpuos
