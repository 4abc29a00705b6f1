// Shared pieces of the diagnosis rules; see diagnosis_rule_support.h.
#include "analysis/diagnosis_rule_support.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/data_pipeline_bound.h"
#include "analysis/worker_restarts.h"

namespace gpuos::rule_support {

double Share(uint64_t part, uint64_t whole) { return whole ? static_cast<double>(part) / whole : 0.0; }

std::string Pct(double share) { return absl::StrFormat("%.1f%%", share * 100); }

std::string GainText(const Finding& f) {
  if (!f.gain) return absl::StrFormat(" Expected gain: %s.", f.gain_model);
  return absl::StrFormat(" Expected gain: the mean step %s shorter (model: %s).", Pct(*f.gain), f.gain_model);
}

void AppendGain(Finding& f) { f.evidence += GainText(f); }

std::string WorkersText(const StepAnalysis& a) {
  if (a.worker_processes == 0) return "no data worker processes (loading runs in the training thread)";
  std::string s = absl::StrFormat("%u data worker processes", a.worker_processes);
  if (a.worker_processes_started > a.worker_processes) {
    s += absl::StrFormat(" at a time (%u started in the run)", a.worker_processes_started);
  }
  if (a.practices.online_cpus > 0) s += absl::StrFormat(" on a host with %u online CPUs", a.practices.online_cpus);
  return s;
}

DataPipelineBound PipelineBound(const DiagnosisInputs& in) {
  return FindDataPipelineBound(in.analysis, WorkerRestartsThatCount(in).steps > 0);
}

bool WorkersAtCoreCount(const StepAnalysis& a) {
  return a.practices.online_cpus > 0 && a.worker_processes > 0 && a.worker_processes + 1 >= a.practices.online_cpus;
}

std::string DataPipelineText(const DiagnosisInputs& in, const DataPipelineBound& b) {
  if (!b.Explained()) return std::string();
  std::vector<std::string> parts;
  for (const auto& [ns, name] : std::vector<std::pair<uint64_t, const char*>>{
           {b.cpu_ns, "on a CPU"},
           {b.disk_ns, "waiting for disk"},
           {b.cpu_wait_ns, "waiting for a CPU (run queue, preempted)"},
           {b.other_io_ns, "blocked in other syscalls"},
           {b.other_ns, "waiting on locks, page faults or memory mapping"}}) {
    if (b.Share(ns) >= 0.01) parts.push_back(absl::StrCat(name, " ", Pct(b.Share(ns))));
  }
  return absl::StrFormat(
      " While the loop waited for data, the data loading (its own, and that of the threads it waited on at the ends "
      "of their wakeup chains) was %s of the %.3f ms a step the trace explains.",
      absl::StrJoin(parts, ", "), in.PerStep(b.explained_ns()) / 1e6);
}

std::string DataLoaderAdvice(const DiagnosisInputs& in, const DataPipelineBound& bound) {
  const StepAnalysis& a = in.analysis;
  const StepRecord& t = in.total();
  switch (bound.Limit()) {
    case DataPipelineLimit::kDisk: {
      const uint64_t bytes = t.os.block_io_workers.bytes + t.os.block_io_launching.bytes;
      const double seconds = in.wall_ns() / 1e9;
      return absl::StrFormat(
          "%sStorage sets the pace: the data loading waited for disk reads (%.1f MiB of block I/O a step, %.0f "
          "MiB/s over the measured steps). More workers overlap more reads and help only while the device has "
          "bandwidth to spare. Keep the data set where reads are cheap -- in memory (the page cache or a RAM disk, "
          "where it fits), on local NVMe rather than network or spinning disks -- read it in large sequential "
          "pieces (samples packed into shards: WebDataset, TFRecord-style files) rather than a file per sample, or "
          "store smaller samples (compressed, resized ahead of time). A data set the page cache can hold is read "
          "from disk in the first epoch only.",
          a.worker_processes == 0 ? "Load batches in DataLoader worker processes (num_workers) so that reads "
                                    "overlap the GPU's work. "
                                  : "",
          in.PerStep(bytes) / (1 << 20), seconds > 0 ? bytes / double(1 << 20) / seconds : 0.0);
    }
    case DataPipelineLimit::kCpuWait:
      return absl::StrFormat(
          "The data workers were runnable but waiting for a CPU: the host's %u CPUs are oversubscribed (%u data "
          "worker processes, each with threads of its own, beside the training threads). More workers will not "
          "help; fewer may. Give each worker one thread (torch.set_num_threads(1) in worker_init_fn, or "
          "OMP_NUM_THREADS=1), keep other work off these cores, or make each batch cheaper to prepare.",
          a.practices.online_cpus, a.worker_processes);
    case DataPipelineLimit::kOtherIo:
      return "The data workers were blocked in system calls that are not local block I/O: reads from a network "
             "file system or from object storage mounted through FUSE, or sockets. Copy or cache the data set on "
             "local storage (or in memory) before training, read larger pieces at a time, and keep more batches "
             "in flight (prefetch_factor, more workers) to hide the latency.";
    case DataPipelineLimit::kCpu:
    case DataPipelineLimit::kUnknown:
      break;
  }
  if (a.worker_processes == 0) {
    return "Load batches in background worker processes: DataLoader(num_workers=N) with N up to the free CPU "
           "cores, plus prefetch_factor; or make preprocessing cheaper (pre-decoded data, GPU decoding such "
           "as DALI).";
  }
  if (WorkersAtCoreCount(a)) {
    return absl::StrFormat(
        "The DataLoader already runs %u worker processes on a host with %u online CPUs: more workers will not "
        "help. What is left is the cost of each batch: cheaper preprocessing (pre-decoded or smaller stored "
        "samples, lighter CPU augmentation, one thread per worker), decoding and augmentation on the GPU (DALI, "
        "transforms on CUDA tensors), cached decoded data -- or a host with more CPU cores per GPU.",
        a.worker_processes, a.practices.online_cpus);
  }
  return absl::StrFormat(
      "Add DataLoader workers (more than the %u now, while CPU cores are free%s) and raise "
      "prefetch_factor, or make preprocessing cheaper (pre-decoded data, GPU decoding such as DALI), "
      "so the next batch is ready when the GPU finishes the current one.",
      a.worker_processes,
      a.practices.online_cpus > 0 ? absl::StrFormat(": the host has %u online CPUs", a.practices.online_cpus)
                                  : std::string());
}

std::string HostWorkText() {
  return absl::StrFormat("ran its own code with no CUDA call for more than %.1f ms at a time before copying data to "
                         "the GPU",
                         kHostWorkGapNs / 1e6);
}

uint64_t CpuSideIdle(const DiagnosisInputs& in) {
  uint64_t sum = 0;
  for (IdleCause cause : {IdleCause::kLaunching, IdleCause::kOtherCudaApi, IdleCause::kOtherCpu,
                          IdleCause::kWaitBackward, IdleCause::kWaitJobThreads}) {
    sum += in.Idle(cause);
  }
  return sum;
}

IdleWithoutChurn IdleBesidesChurn(const DiagnosisInputs& in) {
  const GpuParts& gpu = in.total().gpu;
  IdleWithoutChurn out;
  out.churn_ns = std::min(gpu.idle_allocation_ns, gpu.idle_ns);
  out.idle_ns = gpu.idle_ns - out.churn_ns;
  const uint64_t churn_cpu_side = out.churn_ns - std::min(out.churn_ns, in.Idle(IdleCause::kAllocating));
  const uint64_t cpu_side = CpuSideIdle(in);
  out.cpu_side_ns = cpu_side - std::min(cpu_side, churn_cpu_side);
  return out;
}

}  // namespace gpuos::rule_support
