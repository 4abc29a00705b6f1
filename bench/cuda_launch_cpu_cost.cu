// The CPU time of one kernel launch call, for telling a tracer's CPU-side
// cost per launch from its GPU-side cost (bench/gpu_overhead_breakdown.sh,
// workload launch_cpu).  Empty kernels are launched in batches small enough
// that the launch queue never fills (in the back-to-back loop of
// cuda_launch_rate.cu it may, and then the GPU sets the pace);
// each batch's launch calls are timed on the host clock, then the stream is
// drained untimed.  So "cpu_ns_per_launch" is what the launching thread
// pays per call and nothing else: CUPTI's per-launch instrumentation shows
// up here, its GPU-side timestamps do not.  Each batch follows a short
// reading of the CPU's pace (bench/cpu_pace.h), and "paced_step" is the
// median batch's time per launch in units of that pace (single processes
// scatter by more than the cost measured).  "launch_cpus" lists the CPUs
// the launching thread was seen on (one reading per batch), and "threads"
// each thread's name, last CPU and CPU time from the kernel's accounting,
// to tell whether a tracer's cost depends on where its threads ran.
// Prints one JSON line.
//   cuda_launch_cpu_cost [LAUNCHES_PER_BATCH] [BATCHES]
#include <cuda_runtime.h>
#include <dirent.h>
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cpu_pace.h"
#include "cuda_check.h"

__global__ void EmptyKernel() {}

namespace {
constexpr uint64_t kPaceIterations = 200000;  // about 0.2 ms, as long as a batch
// One JSON object per thread of this process: comm, the CPU it last ran
// on (field 39 of /proc/.../stat) and its on-CPU ns (schedstat).
std::string ThreadsJson() {
  std::string json = "[";
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return "[]";
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + entry->d_name;
    char comm[64] = "?", stat[1024] = "";
    unsigned long long on_cpu_ns = 0;
    if (FILE* f = fopen((base + "/comm").c_str(), "r")) {
      if (fgets(comm, sizeof(comm), f) != nullptr) comm[strcspn(comm, "\n\"\\")] = '\0';
      fclose(f);
    }
    if (FILE* f = fopen((base + "/schedstat").c_str(), "r")) {
      if (fscanf(f, "%llu", &on_cpu_ns) != 1) on_cpu_ns = 0;
      fclose(f);
    }
    int cpu = -1;
    if (FILE* f = fopen((base + "/stat").c_str(), "r")) {
      if (fgets(stat, sizeof(stat), f) != nullptr) {
        // Fields after the ")" that ends comm: state is field 3, processor 39.
        const char* p = strrchr(stat, ')');
        for (int field = 2; p != nullptr && field < 39; ++field) p = strchr(p + 1, ' ');
        if (p != nullptr) cpu = atoi(p + 1);
      }
      fclose(f);
    }
    char item[160];
    snprintf(item, sizeof(item), "%s{\"comm\": \"%s\", \"cpu\": %d, \"cpu_ms\": %.1f}",
             json.size() > 1 ? ", " : "", comm, cpu, on_cpu_ns / 1e6);
    json += item;
  }
  closedir(dir);
  return json + "]";
}

}  // namespace

int main(int argc, char** argv) {
  const int per_batch = argc > 1 ? atoi(argv[1]) : 64;
  const int batches = argc > 2 ? atoi(argv[2]) : 3000;
  if (per_batch <= 0 || batches <= 0) {
    fprintf(stderr, "usage: cuda_launch_cpu_cost [LAUNCHES_PER_BATCH] [BATCHES]\n");
    return 2;
  }
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < 1000; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK(cudaStreamSynchronize(stream));

  using Clock = std::chrono::steady_clock;
  std::vector<double> batch_ns, paced, paces;
  std::set<int> launch_cpus;
  batch_ns.reserve(batches);
  for (int b = 0; b < batches; ++b) {
    launch_cpus.insert(sched_getcpu());
    const double pace = PaceSeconds(kPaceIterations);
    const auto start = Clock::now();
    for (int i = 0; i < per_batch; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
    const auto end = Clock::now();
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream));
    batch_ns.push_back(std::chrono::duration<double, std::nano>(end - start).count());
    paced.push_back(batch_ns.back() / 1e9 / per_batch / pace);
    paces.push_back(pace);
  }
  // The median batch: a batch that met a buffer flush or a preemption
  // says little about the per-call cost.  The mean is printed too, since
  // a tracer's occasional stalls are part of what the job pays.
  double total = 0;
  for (double ns : batch_ns) total += ns;
  const double median_ns = Median(batch_ns) / per_batch;
  const double mean_ns = total / batches / per_batch;
  std::string cpus;
  for (int cpu : launch_cpus) cpus += (cpus.empty() ? "" : ", ") + std::to_string(cpu);
  printf("{\"mode\": \"launch_cpu\", \"profiler\": false, \"rate\": %.1f, "
         "\"cpu_ns_per_launch\": %.1f, \"mean_cpu_ns_per_launch\": %.1f, "
         "\"paced_step\": %.6f, \"pace_ms\": %.4f, \"launch_cpus\": [%s], \"threads\": %s, "
         "\"unit\": \"launch calls/s (CPU time)\"}\n",
         1e9 / median_ns, median_ns, mean_ns, Median(paced), Median(paces) * 1e3, cpus.c_str(),
         ThreadsJson().c_str());
  return 0;
}
