// What CUPTI's activity records cost a raw launch loop, measured inside one
// process: phases of N empty-kernel launches alternate between CUPTI's
// kinds disabled and enabled, and the overhead is 1 - median(enabled rate) /
// median(disabled rate).  On the GPU machine the launch rate of separate
// processes differs by up to 20% for no visible reason (the runs of
// bench/gpu_overhead_breakdown.sh), which swamps the few points that tell
// two tracer variants apart; phases of one process share that luck.
//   cupti_phase_ab [--kinds kernel,runtime] [--phases 10] [--launches 100000]
//                  [--init early|late] [--clock default|monotonic]
// --init early initialises CUPTI before CUDA (as an injected tracer does);
// late, after the CUDA context exists (as torch.profiler does).  Prints one
// JSON line.  Built on the GPU machine by bench/run_cupti_phase_ab.sh.
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "cupti_bench_client.h"

namespace {

using cupti_bench::Completed;
using cupti_bench::MonotonicNs;
using cupti_bench::Requested;

std::vector<CUpti_ActivityKind> ParseKinds(const std::string& list) {
  std::vector<CUpti_ActivityKind> kinds;
  const std::string padded = "," + list + ",";
  auto wanted = [&](const char* name) { return padded.find(std::string(",") + name + ",") != std::string::npos; };
  if (wanted("kernel")) kinds.push_back(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (wanted("runtime")) kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  if (wanted("driver")) kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  return kinds;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

void InitCupti(bool monotonic) {
  if (monotonic) cuptiActivityRegisterTimestampCallback(MonotonicNs);
  if (cuptiActivityRegisterCallbacks(Requested, Completed) != CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_phase_ab: cuptiActivityRegisterCallbacks failed\n");
    exit(1);
  }
}

__global__ void empty_kernel() {}

}  // namespace

int main(int argc, char** argv) {
  std::string kinds_list = "kernel,runtime", init = "early", clock = "default";
  int phases = 10, launches = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--kinds")) kinds_list = argv[i + 1];
    else if (!strcmp(argv[i], "--phases")) phases = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--launches")) launches = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--init")) init = argv[i + 1];
    else if (!strcmp(argv[i], "--clock")) clock = argv[i + 1];
  }
  const std::vector<CUpti_ActivityKind> kinds = ParseKinds(kinds_list);
  if (init == "early") InitCupti(clock == "monotonic");
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 1>>>();
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "cupti_phase_ab: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  if (init != "early") InitCupti(clock == "monotonic");

  std::vector<double> off, on;
  for (int phase = 0; phase < phases; ++phase) {
    const bool enabled = phase % 2 == 1;
    for (CUpti_ActivityKind kind : kinds) {
      if (enabled) cuptiActivityEnable(kind);
      else cuptiActivityDisable(kind);
    }
    cuptiActivityFlushAll(0);
    // A few launches to settle whatever enabling set up, outside the timing.
    for (int i = 0; i < 100; ++i) empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 1>>>();
    cudaError_t err = cudaDeviceSynchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (err != cudaSuccess) {
      fprintf(stderr, "cupti_phase_ab: %s\n", cudaGetErrorString(err));
      return 1;
    }
    (enabled ? on : off).push_back(launches / s);
  }
  for (CUpti_ActivityKind kind : kinds) cuptiActivityDisable(kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

  auto list = [](const std::vector<double>& v) {
    std::string s;
    for (double x : v) s += (s.empty() ? "" : ", ") + std::to_string(static_cast<long>(x));
    return s;
  };
  printf("{\"kinds\": \"%s\", \"init\": \"%s\", \"clock\": \"%s\", \"off\": [%s], \"on\": [%s], "
         "\"overhead_pct\": %.1f}\n",
         kinds_list.c_str(), init.c_str(), clock.c_str(), list(off).c_str(), list(on).c_str(),
         (1 - Median(on) / Median(off)) * 100);
  return 0;
}
