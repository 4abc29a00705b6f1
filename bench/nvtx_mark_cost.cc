// What one NVTX push and pop costs the thread that makes them: ROUNDS
// rounds of N push/pop pairs, in a domain with a fixed name (the Python
// hook's kind of range) and in the default domain with a new name each
// time ("step <i>", the kind a training loop makes).  Run it untraced,
// under `gpuos-trace --prepare --` (the shim loaded, not recording) and
// under `gpuos-trace --` (recording); bench/mark_cost.sh does all three.
// Prints the median of the rounds, ns per pair, for each kind; then the
// median cost of one training step's worth of marks (a "step <i>" range
// holding a fixed-name one) made with cold caches, after sweeping 64 MiB,
// as a step's own work leaves them: what a mark costs in a real loop is
// mostly its cache misses.
//   nvtx_mark_cost [N] [ROUNDS]
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/median.h"
#include "common/monotonic_clock.h"

using gpuos::Median;
using gpuos::MonotonicNs;

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 50000;
  const int rounds = argc > 2 ? atoi(argv[2]) : 7;
  if (n <= 0 || rounds <= 0) {
    fprintf(stderr, "usage: nvtx_mark_cost [N] [ROUNDS]\n");
    return 2;
  }
  nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuos.python");
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "autograd.backward";
  std::vector<double> fixed, named;
  for (int round = 0; round < rounds; ++round) {
    const uint64_t t0 = MonotonicNs();
    for (int i = 0; i < n; ++i) {
      nvtxDomainRangePushEx(domain, &attributes);
      nvtxDomainRangePop(domain);
    }
    const uint64_t t1 = MonotonicNs();
    for (int i = 0; i < n; ++i) {
      const std::string name = "step " + std::to_string(i);
      nvtxRangePushA(name.c_str());
      nvtxRangePop();
    }
    const uint64_t t2 = MonotonicNs();
    fixed.push_back(static_cast<double>(t1 - t0) / n);
    named.push_back(static_cast<double>(t2 - t1) / n);
    // Lets the shim's sender drain between rounds, as a training step would.
    timespec pause{0, 100'000'000};
    nanosleep(&pause, nullptr);
  }
  std::vector<char> sweep(64u << 20);
  std::vector<double> cold;
  for (int i = 0; i < 2000; ++i) {
    for (size_t at = 0; at < sweep.size(); at += 64) sweep[at]++;
    const std::string name = "step " + std::to_string(i);
    const uint64_t t0 = MonotonicNs();
    nvtxRangePushA(name.c_str());
    nvtxDomainRangePushEx(domain, &attributes);
    nvtxDomainRangePop(domain);
    nvtxRangePop();
    cold.push_back(static_cast<double>(MonotonicNs() - t0));
  }
  printf("fixed-name domain range %.0f ns, named step range %.0f ns (push+pop, median of %d rounds of %d); "
         "cold caches, a step range holding a fixed-name one %.0f ns (median of 2000)\n",
         Median(fixed), Median(named), rounds, n, Median(cold));
  return 0;
}
