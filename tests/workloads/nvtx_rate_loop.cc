// A job that measures its own progress, for the fault tests: a loop of
// "steps" (an NVTX range "step" around a 20 us nanosleep and an mmap/munmap
// pair, so each step puts several events into the tracer's ring buffer and
// shim socket) for --seconds, counting the steps done in each --window-ms
// window of CLOCK_MONOTONIC.  At the end it writes to --log one line per
// whole window and then the steps of the whole run:
//   window <start_ns> <end_ns> <steps>
//   total <steps>
// Usage: nvtx_rate_loop --log FILE [--seconds S] [--window-ms W]
#include <nvtx3/nvToolsExt.h>
#include <sys/mman.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::string log;
  double seconds = 6;
  uint64_t window_ns = 250'000'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--log") == 0) log = argv[i + 1];
    else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--window-ms") == 0) window_ns = strtoull(argv[i + 1], nullptr, 10) * 1'000'000ull;
  }
  if (log.empty() || window_ns == 0) {
    fprintf(stderr, "usage: nvtx_rate_loop --log FILE [--seconds S] [--window-ms W]\n");
    return 2;
  }
  const uint64_t start = NowNs();
  const uint64_t end = start + static_cast<uint64_t>(seconds * 1e9);
  std::vector<uint64_t> steps((end - start) / window_ns + 1, 0);
  uint64_t total = 0;
  const timespec nap{0, 20'000};
  for (uint64_t now = start; now < end; now = NowNs()) {
    nvtxRangePushA("step");
    nanosleep(&nap, nullptr);
    void* p = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) munmap(p, 8192);
    nvtxRangePop();
    ++steps[(now - start) / window_ns];
    ++total;
  }
  FILE* out = fopen(log.c_str(), "w");
  if (out == nullptr) return 1;
  for (size_t w = 0; w + 1 < steps.size(); ++w) {  // the last window is cut short
    fprintf(out, "window %llu %llu %llu\n", static_cast<unsigned long long>(start + w * window_ns),
            static_cast<unsigned long long>(start + (w + 1) * window_ns),
            static_cast<unsigned long long>(steps[w]));
  }
  fprintf(out, "total %llu\n", static_cast<unsigned long long>(total));
  return fclose(out) == 0 ? 0 : 1;
}
