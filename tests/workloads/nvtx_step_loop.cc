// A training loop stand-in for attach tests of `gpuos-trace --prepare`:
// NVTX ranges "step N" (N = 0, 1, ...), each about 3 ms long, until SIGTERM
// (or --seconds); then writes to --log one line per range:
//   range <N> <start_ns> <end_ns>      (CLOCK_MONOTONIC, taken around the
//                                       push and the pop)
// Usage: nvtx_step_loop --log FILE [--seconds S]
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::string log_path;
  double seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--log") log_path = argv[i + 1];
    if (flag == "--seconds") seconds = atof(argv[i + 1]);
  }
  if (log_path.empty()) {
    fprintf(stderr, "usage: nvtx_step_loop --log FILE [--seconds S]\n");
    return 2;
  }
  signal(SIGTERM, [](int) { g_stop = true; });
  struct Range {
    uint64_t start, end;
  };
  std::vector<Range> ranges;
  ranges.reserve(100000);
  const uint64_t end = NowNs() + static_cast<uint64_t>(seconds * 1e9);
  for (int n = 0; !g_stop && NowNs() < end; ++n) {
    std::string name = "step " + std::to_string(n);
    uint64_t t0 = NowNs();
    nvtxRangePushA(name.c_str());
    timespec pause{0, 3'000'000};
    nanosleep(&pause, nullptr);
    nvtxRangePop();
    ranges.push_back({t0, NowNs()});
  }
  FILE* out = fopen(log_path.c_str(), "w");
  if (!out) return 3;
  for (size_t n = 0; n < ranges.size(); ++n) {
    fprintf(out, "range %zu %llu %llu\n", n, static_cast<unsigned long long>(ranges[n].start),
            static_cast<unsigned long long>(ranges[n].end));
  }
  fclose(out);
  return 0;
}
