// Traces of "two hosts" for the merge tests, written with the real
// TraceWriter: the same job (pid 100 with threads 100 and 101, off-CPU
// waits, NVTX steps, page faults, optionally NCCL allreduce kernels), once
// per host, the second host's monotonic clock `shift_ns` ahead of the
// first's, and its wall clock `wall_error_ns` off (an NTP error).
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpuos_trace.pb.h"
#include "stream/trace_writer.h"

namespace gpuos::merge_fixture {

inline constexpr uint64_t kStartNs = 1'000'000'000'000;  // host A's monotonic at start
inline constexpr uint64_t kWallStartNs = 1'790'000'000'000'000'000;
inline constexpr uint64_t kStepNs = 100'000'000;
inline constexpr int kSteps = 20;

struct HostSpec {
  std::string hostname;
  int64_t shift_ns = 0;       // this host's monotonic - host A's, at the same instant
  int64_t wall_error_ns = 0;  // this host's wall clock - the true wall time
  bool allreduce = false;
  uint32_t seed = 1;          // jitter of the allreduce ends
};

inline uint64_t At(uint64_t ns_on_a, const HostSpec& host) {
  return static_cast<uint64_t>(static_cast<int64_t>(ns_on_a) + host.shift_ns);
}

// Returns "" or the writer's error.
inline std::string WriteHostTrace(const std::string& path, const HostSpec& host) {
  auto writer = TraceWriter::Create(path);
  if (!writer.ok()) return std::string(writer.status().message());
  v1::TraceHeader header;
  header.set_format_version(1);
  header.set_hostname(host.hostname);
  header.set_root_pid(100);
  header.add_command_line("python3");
  header.add_command_line("train.py");
  v1::ClockPair* start = header.mutable_start_clock();
  start->set_monotonic_ns(At(kStartNs, host));
  start->set_realtime_ns(static_cast<uint64_t>(static_cast<int64_t>(kWallStartNs) + host.wall_error_ns));
  start->set_uncertainty_ns(40);
  if (!(*writer)->WriteHeader(header).ok()) return "header";

  auto event = [&](uint64_t ns_on_a, uint32_t pid, uint32_t tid) {
    v1::Event e;
    e.set_ts_ns(At(ns_on_a, host));
    e.set_pid(pid);
    e.set_tid(tid);
    return e;
  };
  std::string error;
  auto append = [&](const v1::Event& e) {
    if (error.empty() && !(*writer)->Append(e).ok()) error = "append";
  };
  v1::Event e = event(kStartNs + 1000, 100, 100);
  e.mutable_process_start()->set_comm("python3");
  e.mutable_process_start()->set_ppid(1);
  e.mutable_process_start()->set_is_root(true);
  append(e);
  e = event(kStartNs + 2000, 100, 101);
  e.mutable_thread_start()->set_comm("pt_autograd_0");
  e.mutable_thread_start()->set_creator_tid(100);
  append(e);
  std::mt19937 random(host.seed);
  std::uniform_int_distribution<int> jitter(-2000, 2000);
  for (int step = 0; step < kSteps; ++step) {
    const uint64_t begin = kStartNs + 1'000'000 + step * kStepNs;
    e = event(begin, 100, 100);
    e.mutable_nvtx_range()->set_name(absl::StrCat("step ", step));
    e.mutable_nvtx_range()->set_duration_ns(kStepNs - 1000);
    append(e);
    e = event(begin + 10'000, 100, 100);
    e.mutable_off_cpu()->set_duration_ns(5'000'000);
    e.mutable_off_cpu()->set_cause(v1::OFF_CPU_CAUSE_FUTEX);
    e.mutable_off_cpu()->set_voluntary(true);
    e.mutable_off_cpu()->set_woken_by_tid(101);
    e.mutable_off_cpu()->set_waker_pid(100);
    append(e);
    e = event(begin + 20'000, 100, 101);
    e.mutable_page_faults()->set_count(3);
    e.mutable_page_faults()->set_last_ns(At(begin + 900'000, host));
    append(e);
    if (host.allreduce) {
      // Every rank's allreduce ends within a few microseconds of the others'.
      const uint64_t end_on_a = begin + 80'000'000 + jitter(random);
      e = event(end_on_a - 3'000'000, 100, 0);
      e.mutable_gpu_kernel()->set_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
      e.mutable_gpu_kernel()->set_duration_ns(3'000'000);
      append(e);
    }
  }
  e = event(kStartNs + 1'000'000 + kSteps * kStepNs, 100, 100);
  e.mutable_process_exit()->set_comm("python3");
  append(e);
  if (!error.empty()) return error;

  v1::TraceTrailer trailer;
  v1::ClockPair* end = trailer.mutable_end_clock();
  const uint64_t end_on_a = kStartNs + 2'000'000 + kSteps * kStepNs;
  end->set_monotonic_ns(At(end_on_a, host));
  end->set_realtime_ns(static_cast<uint64_t>(static_cast<int64_t>(kWallStartNs + (end_on_a - kStartNs)) +
                                             host.wall_error_ns));
  end->set_uncertainty_ns(40);
  trailer.set_root_exited(true);
  trailer.set_events_written((*writer)->events_written());
  if (!(*writer)->WriteTrailer(trailer).ok()) return "trailer";
  if (!(*writer)->Close().ok()) return "close";
  return "";
}

}  // namespace gpuos::merge_fixture
