// Helper for bench/export_bench.sh (the export benchmark), three commands:
//
//   export_bench generate OUT.gpuos EVENTS
//       writes a synthetic trace shaped like a training job's: two processes
//       with eight threads each, NVTX steps, CUDA launches and their kernels,
//       copies, off-CPU intervals, futex waits, mmap/munmap, page faults.
//       CUDA records are written about two seconds after their time, in
//       bursts, as the shim delivers them; off-CPU intervals at their end.
//   export_bench export IN.gpuos OUT.pftrace [OUT.json]
//       calls the exporter directly (for when the CLI lacks `export`).
//   export_bench check OUT.pftrace
//       streams the output through PerfettoTraceChecker and prints counts.
#include <stdio.h>
#include <stdlib.h>

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "export/perfetto/perfetto_export.h"
#include "support/perfetto_trace_check.h"
#include "stream/trace_writer.h"

namespace {

using gpuos::v1::Event;

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kCudaLateness = 2000 * kMs;

class Generator {
 public:
  Generator(gpuos::TraceWriter* writer, uint64_t target) : writer_(writer), target_(target) {}

  bool Run() {
    for (uint32_t p = 0; p < 2; ++p) {
      const uint32_t pid = 1000 + p * 100;
      Event start = Base(now_, pid, pid);
      start.mutable_process_start()->set_comm(p == 0 ? "python3" : "pt_data_worker");
      start.mutable_process_start()->set_is_root(p == 0);
      Write(start);
      for (uint32_t t = 1; t < 8; ++t) {
        Event thread = Base(now_, pid, pid + t);
        thread.mutable_thread_start()->set_comm(absl::StrCat("worker", t));
        Write(thread);
      }
    }
    uint64_t step = 0;
    while (written_ < target_) Step(step++);
    // The last CUDA records, and the last off-CPU intervals.
    while (!cuda_.empty()) FlushCuda(UINT64_MAX);
    return ok_;
  }

 private:
  Event Base(uint64_t ts, uint32_t pid, uint32_t tid) {
    Event event;
    event.set_ts_ns(ts);
    event.set_pid(pid);
    event.set_tid(tid);
    return event;
  }
  void Write(const Event& event) {
    if (!writer_->Append(event).ok()) ok_ = false;
    ++written_;
  }
  // CUDA records leave the shim in bursts, seconds after the work.
  void Cuda(const Event& event) { cuda_.push_back(event); }
  void FlushCuda(uint64_t now) {
    while (!cuda_.empty() && cuda_.front().ts_ns() + kCudaLateness <= now) {
      // Bursts come out of order within a buffer: swap neighbours at random.
      if (cuda_.size() > 1 && rng_() % 3 == 0) std::swap(cuda_[0], cuda_[1]);
      Write(cuda_.front());
      cuda_.pop_front();
    }
  }

  // One training step of process `pid`'s main thread launching 40 kernels,
  // with the OS activity of its threads around it.
  void Step(uint64_t step) {
    const uint32_t pid = 1000 + (step % 2) * 100;
    const uint64_t step_start = now_;
    uint64_t t = now_;
    uint64_t gpu = t + 50 * kUs;
    for (int k = 0; k < 40; ++k) {
      const uint32_t correlation = ++correlation_;
      Event api = Base(t, pid, pid);
      api.mutable_cuda_api()->set_duration_ns(5 * kUs);
      api.mutable_cuda_api()->set_name(k % 10 == 9 ? "cudaMemcpyAsync_v3020" : "cudaLaunchKernel_v7000");
      api.mutable_cuda_api()->set_correlation_id(correlation);
      Cuda(api);
      gpu = std::max(gpu, t + 8 * kUs);
      Event work = Base(gpu, pid, 0);
      if (k % 10 == 9) {
        auto* copy = work.mutable_gpu_memcpy();
        copy->set_duration_ns(30 * kUs);
        copy->set_bytes(4 << 20);
        copy->set_direction(gpuos::v1::MEMCPY_HTOD);
        copy->set_src_kind(gpuos::v1::MEMORY_PINNED);
        copy->set_dst_kind(gpuos::v1::MEMORY_DEVICE);
        copy->set_stream(7);
        copy->set_correlation_id(correlation);
        gpu += 30 * kUs;
      } else {
        auto* kernel = work.mutable_gpu_kernel();
        kernel->set_duration_ns(40 * kUs + (rng_() % 20) * kUs);
        kernel->set_name(kKernels[k % 4]);
        kernel->set_stream(7);
        kernel->set_correlation_id(correlation);
        kernel->set_grid_x(256);
        kernel->set_block_x(128);
        gpu += kernel->duration_ns();
      }
      Cuda(work);
      // Worker threads: an off-CPU interval and a futex wait, written when
      // they end; now and then mmap/munmap and page faults.
      const uint32_t tid = pid + 1 + k % 7;
      Event off = Base(t + 2 * kUs, pid, tid);
      off.mutable_off_cpu()->set_duration_ns(30 * kUs);
      off.mutable_off_cpu()->set_cause(gpuos::v1::OFF_CPU_CAUSE_FUTEX);
      off.mutable_off_cpu()->set_syscall_nr(202);
      Event wait = Base(t + 1 * kUs, pid, tid);
      wait.mutable_futex_wait()->set_duration_ns(40 * kUs);
      Write(wait);
      Write(off);
      if (k % 8 == 0) {
        Event map = Base(t + 3 * kUs, pid, pid);
        map.mutable_mmap()->set_duration_ns(15 * kUs);
        map.mutable_mmap()->set_length(1 << 21);
        Write(map);
        Event unmap = Base(t + 20 * kUs, pid, pid);
        unmap.mutable_munmap()->set_duration_ns(10 * kUs);
        unmap.mutable_munmap()->set_length(1 << 21);
        Write(unmap);
        Event faults = Base(t, pid, pid + 2);
        faults.mutable_page_faults()->set_last_ns(t + 50 * kUs);
        faults.mutable_page_faults()->set_count(12);
        Write(faults);
      }
      t += 10 * kUs;
    }
    now_ = std::max(t, gpu) + 20 * kUs;
    Event range = Base(step_start, pid, pid);
    range.mutable_nvtx_range()->set_duration_ns(now_ - step_start);
    range.mutable_nvtx_range()->set_name("train_step");
    Write(range);
    FlushCuda(now_);
  }

  static constexpr const char* kKernels[4] = {
      "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, float*)",
      "ampere_sgemm_128x64_nn", "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512>(float*)",
      "void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)"};

  gpuos::TraceWriter* writer_;
  uint64_t target_;
  uint64_t written_ = 0;
  uint64_t now_ = 5000 * kMs;
  uint32_t correlation_ = 0;
  std::deque<Event> cuda_;
  std::mt19937 rng_{1};
  bool ok_ = true;
};

int Generate(const std::string& path, uint64_t events) {
  auto writer = gpuos::TraceWriter::Create(path);
  if (!writer.ok()) {
    fprintf(stderr, "%s\n", writer.status().ToString().c_str());
    return 1;
  }
  gpuos::v1::TraceHeader header;
  header.set_tracer_version("export_bench");
  header.set_root_pid(1000);
  header.add_command_line("python3");
  header.add_command_line("train.py");
  (*header.mutable_syscall_names())[202] = "futex";
  if (!(*writer)->WriteHeader(header).ok()) return 1;
  Generator generator(writer->get(), events);
  if (!generator.Run()) return 1;
  gpuos::v1::TraceTrailer trailer;
  trailer.set_events_written((*writer)->events_written());
  if (!(*writer)->WriteTrailer(trailer).ok() || !(*writer)->Close().ok()) return 1;
  printf("events %llu\n", static_cast<unsigned long long>((*writer)->events_written()));
  return 0;
}

int Export(const std::string& in, const std::string& out, const std::string& json) {
  gpuos::ExportOptions options;
  options.chrome_json_path = json;
  auto summary = gpuos::ExportTrace(in, out, options);
  if (!summary.ok()) {
    fprintf(stderr, "%s\n", summary.status().ToString().c_str());
    return 1;
  }
  printf("events %llu slices %llu flows %llu counters %llu lanes %llu runs %llu packets %llu bytes %llu\n",
         static_cast<unsigned long long>(summary->events_read),
         static_cast<unsigned long long>(summary->slices),
         static_cast<unsigned long long>(summary->flows),
         static_cast<unsigned long long>(summary->counter_values),
         static_cast<unsigned long long>(summary->overflow_lanes),
         static_cast<unsigned long long>(summary->sort_runs_spilled),
         static_cast<unsigned long long>(summary->perfetto_packets),
         static_cast<unsigned long long>(summary->perfetto_bytes));
  return summary->input_status.ok() ? 0 : 1;
}

int Check(const std::string& path) {
  auto check = gpuos::CheckPerfettoTraceFile(path);
  if (!check.ok()) {
    fprintf(stderr, "%s\n", check.status().ToString().c_str());
    return 1;
  }
  printf("packets %llu slices %llu instants %llu counter_values %llu flows %llu violations %llu\n",
         static_cast<unsigned long long>(check->packets),
         static_cast<unsigned long long>(check->slices),
         static_cast<unsigned long long>(check->instants),
         static_cast<unsigned long long>(check->counter_values),
         static_cast<unsigned long long>(check->flows),
         static_cast<unsigned long long>(check->violation_count));
  for (const std::string& v : check->violations) printf("  %s\n", v.c_str());
  return check->ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "generate") return Generate(args[1], std::stoull(args[2]));
  if ((args.size() == 3 || args.size() == 4) && args[0] == "export") {
    return Export(args[1], args[2], args.size() == 4 ? args[3] : "");
  }
  if (args.size() == 2 && args[0] == "check") return Check(args[1]);
  fprintf(stderr,
          "usage: export_bench generate OUT.gpuos EVENTS\n"
          "       export_bench export IN.gpuos OUT.pftrace [OUT.json]\n"
          "       export_bench check OUT.pftrace\n");
  return 2;
}
