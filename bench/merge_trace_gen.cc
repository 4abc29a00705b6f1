// Helper for bench/merge_bench.sh: writes one host's synthetic trace of a
// data-parallel job with the real TraceWriter.
//
//   merge_trace_gen OUT.gpuos EVENTS HOSTNAME SHIFT_NS SEED
//
// Two processes of eight threads each; per step an NVTX range, CUDA launch
// calls, their kernels (one an NCCL allreduce) delivered in bursts about two
// seconds late, as the shim delivers them (so the file is in arrival order,
// not time order), off-CPU intervals, futex waits and page faults.  The
// host's monotonic clock is SHIFT_NS ahead of a reference host's, and its
// monotonic/realtime pairs say so exactly; allreduce ends are the same
// instants on every host, plus a few microseconds of jitter.
#include <stdio.h>
#include <stdlib.h>

#include <cstdint>
#include <deque>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "stream/trace_writer.h"

namespace {

using gpuos::v1::Event;
constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kWallAtZero = 1'790'000'000'000'000'000;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: merge_trace_gen OUT.gpuos EVENTS HOSTNAME SHIFT_NS SEED\n");
    return 2;
  }
  const std::string out = argv[1];
  const uint64_t target = strtoull(argv[2], nullptr, 10);
  const std::string hostname = argv[3];
  const int64_t shift = strtoll(argv[4], nullptr, 10);
  std::mt19937 random(static_cast<uint32_t>(strtoul(argv[5], nullptr, 10)));
  std::uniform_int_distribution<int> jitter(-3000, 3000);

  auto writer = gpuos::TraceWriter::Create(out);
  if (!writer.ok()) {
    fprintf(stderr, "%s\n", std::string(writer.status().message()).c_str());
    return 1;
  }
  auto local = [&](uint64_t ns) { return static_cast<uint64_t>(static_cast<int64_t>(ns) + shift); };
  const uint64_t start = 5000 * kMs;
  gpuos::v1::TraceHeader header;
  header.set_tracer_version("merge_trace_gen");
  header.set_hostname(hostname);
  header.set_root_pid(1000);
  header.add_command_line("python3");
  header.add_command_line("train.py");
  (*header.mutable_syscall_names())[202] = "futex";
  header.mutable_start_clock()->set_monotonic_ns(local(start));
  header.mutable_start_clock()->set_realtime_ns(kWallAtZero + start);
  header.mutable_start_clock()->set_uncertainty_ns(30);
  if (!(*writer)->WriteHeader(header).ok()) return 1;

  uint64_t written = 0;
  bool ok = true;
  auto write = [&](Event& e) {
    e.set_ts_ns(local(e.ts_ns()));
    if (!(*writer)->Append(e).ok()) ok = false;
    ++written;
  };
  for (uint32_t p = 0; p < 2; ++p) {
    const uint32_t pid = 1000 + p * 100;
    Event e;
    e.set_ts_ns(start);
    e.set_pid(pid);
    e.set_tid(pid);
    e.mutable_process_start()->set_comm(p == 0 ? "python3" : "pt_data_worker");
    write(e);
    for (uint32_t t = 1; t < 8; ++t) {
      Event th;
      th.set_ts_ns(start);
      th.set_pid(pid);
      th.set_tid(pid + t);
      th.mutable_thread_start()->set_comm(absl::StrCat("worker", t));
      write(th);
    }
  }
  std::deque<Event> late;  // GPU records, delivered ~2 s after their time
  uint64_t now = start + kMs;
  uint32_t correlation = 0;
  for (uint64_t step = 0; written < target && ok; ++step) {
    const uint64_t step_start = now;
    for (int k = 0; k < 40 && written < target; ++k) {
      Event call;
      call.set_ts_ns(now);
      call.set_pid(1000);
      call.set_tid(1000);
      call.mutable_cuda_api()->set_name("cudaLaunchKernel");
      call.mutable_cuda_api()->set_duration_ns(5 * kUs);
      call.mutable_cuda_api()->set_correlation_id(++correlation);
      write(call);
      Event kernel;
      kernel.set_ts_ns(now + 20 * kUs);
      kernel.set_pid(1000);
      kernel.mutable_gpu_kernel()->set_name(k == 39 ? "ncclDevKernel_AllReduce_Sum_f32_RING_LL" : "volta_sgemm_128x64_nn");
      kernel.mutable_gpu_kernel()->set_correlation_id(correlation);
      kernel.mutable_gpu_kernel()->set_duration_ns(k == 39 ? 2 * kMs : 100 * kUs);
      if (k == 39) kernel.set_ts_ns(kernel.ts_ns() + jitter(random));
      late.push_back(kernel);
      for (uint32_t t = 1; t < 8 && written < target; ++t) {
        Event off;
        off.set_ts_ns(now + t * kUs);
        off.set_pid(t < 4 ? 1000 : 1100);
        off.set_tid(off.pid() + t);
        off.mutable_off_cpu()->set_duration_ns(50 * kUs);
        off.mutable_off_cpu()->set_runqueue_ns(3 * kUs);
        off.mutable_off_cpu()->set_cause(gpuos::v1::OFF_CPU_CAUSE_FUTEX);
        off.mutable_off_cpu()->set_woken_by_tid(1000);
        off.mutable_off_cpu()->set_waker_pid(1000);
        write(off);
      }
      Event faults;
      faults.set_ts_ns(now);
      faults.set_pid(1100);
      faults.set_tid(1101);
      faults.mutable_page_faults()->set_count(4);
      faults.mutable_page_faults()->set_last_ns(local(now + 500 * kUs));
      write(faults);
      now += 130 * kUs;
    }
    Event range;
    range.set_ts_ns(step_start);
    range.set_pid(1000);
    range.set_tid(1000);
    range.mutable_nvtx_range()->set_name(absl::StrCat("step ", step));
    range.mutable_nvtx_range()->set_duration_ns(now - step_start);
    write(range);
    while (!late.empty() && late.front().ts_ns() + 2000 * kMs < now && written < target) {
      write(late.front());
      late.pop_front();
    }
  }
  while (!late.empty() && ok) {
    write(late.front());
    late.pop_front();
  }
  gpuos::v1::TraceTrailer trailer;
  trailer.mutable_end_clock()->set_monotonic_ns(local(now));
  trailer.mutable_end_clock()->set_realtime_ns(kWallAtZero + now);
  trailer.mutable_end_clock()->set_uncertainty_ns(30);
  trailer.set_events_written((*writer)->events_written());
  trailer.set_root_exited(true);
  if (!ok || !(*writer)->WriteTrailer(trailer).ok() || !(*writer)->Close().ok()) return 1;
  printf("%s: %llu events\n", out.c_str(), static_cast<unsigned long long>(written));
  return 0;
}
