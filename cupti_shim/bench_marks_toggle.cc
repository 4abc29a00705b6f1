#include "bench_marks_toggle.h"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace gpuos_shim {
namespace {

struct Toggle {
  uint64_t period_ns = 0;  // 0: the knob is unset or bad
  bool dry = false;        // flips logged, marks never off: the benchmark's control
  FILE* log = nullptr;
  std::atomic<uint64_t> first_ns{0};
  std::atomic<uint64_t> period_index{0};
  std::mutex log_mu;
};

Toggle* Configure() {
  auto* toggle = new Toggle();  // lives as long as the process: marks may come from any thread at exit
  const char* value = getenv("GPUOS_BENCH_MARKS_TOGGLE");
  if (!value) return toggle;
  char* end = nullptr;
  const unsigned long long period_ms = strtoull(value, &end, 10);
  if (period_ms == 0 || !end || *end != ':' || end[1] == '\0') {
    fprintf(stderr, "gpuos-shim: warning: GPUOS_BENCH_MARKS_TOGGLE wants PERIOD_MS:LOG; ignored\n");
    return toggle;
  }
  toggle->log = fopen(end + 1, "w");
  if (!toggle->log) {
    fprintf(stderr, "gpuos-shim: warning: GPUOS_BENCH_MARKS_TOGGLE: cannot write %s; ignored\n", end + 1);
    return toggle;
  }
  toggle->period_ns = period_ms * 1'000'000ull;
  const char* dry = getenv("GPUOS_BENCH_MARKS_TOGGLE_DRY");
  toggle->dry = dry && strcmp(dry, "1") == 0;
  fprintf(stderr, "gpuos-shim: warning: GPUOS_BENCH_MARKS_TOGGLE: marks go off and on every %llu ms; "
                  "marks are missing\n", period_ms);
  return toggle;
}

Toggle& TheToggle() {
  static Toggle* toggle = Configure();
  return *toggle;
}

void LogFlip(Toggle& toggle, const char* kind, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(toggle.log_mu);
  fprintf(toggle.log, "%s %" PRIu64 "\n", kind, now_ns);
  fflush(toggle.log);
}

}  // namespace

bool BenchMarksPaused(uint64_t now_ns) {
  Toggle& toggle = TheToggle();
  if (toggle.period_ns == 0) return false;
  uint64_t first = toggle.first_ns.load(std::memory_order_relaxed);
  if (first == 0) {
    if (toggle.first_ns.compare_exchange_strong(first, now_ns)) {
      first = now_ns;
      LogFlip(toggle, "on", now_ns);
    }  // else another thread was first: `first` holds its time
  }
  const uint64_t index = now_ns > first ? (now_ns - first) / toggle.period_ns : 0;
  uint64_t seen = toggle.period_index.load(std::memory_order_relaxed);
  // The thread that first sees a new period logs the flip, at the time
  // the marks actually changed.
  if (index > seen && toggle.period_index.compare_exchange_strong(seen, index) && index % 2 != seen % 2) {
    LogFlip(toggle, index % 2 ? "off" : "on", now_ns);
  }
  return index % 2 == 1 && !toggle.dry;
}

}  // namespace gpuos_shim
