// Peak memory of the recording path over a day-long equivalent: feeds
// synthetic events (a training job's mix: off-CPU intervals, futex waits,
// CUDA launches and kernels, NVTX steps, per-second syscall totals, and
// threads that come and go) through the flight recorder, the sink a long
// --flight-recorder recording writes to, and prints the process's peak RSS
// every 10 million events, at 10M and at the end, with the events per
// second.  No BPF: the events are made here.  The ring is dumped at 10M
// events (as a signal would) and at the end, so both figures hold a dump.
//
//   flight_recorder_memory [--events N] [--ring SIZE_BYTES] [--dir DIR]
//
// Defaults: 200 million events, a 64 MiB ring under /tmp; the dumps and the
// ring are removed at the end.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "stream/flight_recorder.h"

namespace {

using gpuos::v1::Event;

double Seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

long PeakRssKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

long CurrentRssKiB() {
  FILE* f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f != nullptr) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// A job of kProcesses processes with kThreads threads each; every
// kChurnEvents events one data-loader thread exits and a new one (a new
// tid) starts, as workers are replaced each epoch.
constexpr uint32_t kProcesses = 4;
constexpr uint32_t kThreads = 16;
constexpr uint64_t kChurnEvents = 20'000;

class Job {
 public:
  explicit Job(uint64_t start_ns) : ts_(start_ns) {
    for (uint32_t p = 0; p < kProcesses; ++p) {
      const uint32_t pid = 1000 + p * 1000;
      for (uint32_t t = 0; t < kThreads; ++t) tids_.push_back({pid, pid + t});
    }
  }

  template <typename Emit>
  void Start(Emit&& emit) {
    for (const auto& [pid, tid] : tids_) {
      Event e;
      e.set_ts_ns(ts_);
      e.set_pid(pid);
      e.set_tid(tid);
      if (pid == tid) {
        e.mutable_process_start()->set_comm("python");
      } else {
        e.mutable_thread_start()->set_comm("pt_data_worker");
      }
      emit(e);
    }
  }

  // The i-th event of the stream.
  template <typename Emit>
  void Next(uint64_t i, Emit&& emit) {
    ts_ += 2'000;  // 500k events/s of job time
    const auto& [pid, tid] = tids_[i % tids_.size()];
    event_.Clear();
    event_.set_ts_ns(ts_);
    event_.set_pid(pid);
    event_.set_tid(tid);
    switch (i % 8) {
      case 0:
      case 1: {
        auto* off = event_.mutable_off_cpu();
        off->set_duration_ns(50'000 + i % 977);
        off->set_runqueue_ns(3'000);
        off->set_cause(gpuos::v1::OFF_CPU_CAUSE_FUTEX);
        off->set_syscall_nr(202);
        off->set_voluntary(true);
        off->set_prev_state(1);
        break;
      }
      case 2: {
        auto* f = event_.mutable_futex_wait();
        f->set_duration_ns(40'000);
        f->set_uaddr(0x7f0000001000 + (i % 64) * 64);
        f->set_result(0);
        break;
      }
      case 3: {
        auto* api = event_.mutable_cuda_api();
        api->set_duration_ns(4'000);
        api->set_name("cudaLaunchKernel");
        api->set_cbid(211);
        api->set_correlation_id(static_cast<uint32_t>(i));
        break;
      }
      case 4: {
        event_.set_tid(0);
        auto* k = event_.mutable_gpu_kernel();
        k->set_duration_ns(120'000);
        k->set_name(i % 3 ? "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
                          : "ampere_sgemm_128x64_nn");
        k->set_stream(7);
        k->set_correlation_id(static_cast<uint32_t>(i - 1));
        k->set_grid_x(1024);
        k->set_block_x(256);
        break;
      }
      case 5: {
        auto* r = event_.mutable_nvtx_range();
        r->set_duration_ns(100'000'000);
        r->set_name(i % 16 == 5 ? "step " + std::to_string(i / 16) : "forward");
        break;
      }
      case 6: {
        auto* s = event_.mutable_syscall_stats();
        s->set_nr(static_cast<int32_t>(i % 300));
        s->set_calls(i);
        s->set_total_ns(i * 1000);
        s->set_max_ns(90'000);
        break;
      }
      default: {
        auto* pf = event_.mutable_page_faults();
        pf->set_last_ns(ts_ + 1'000'000);
        pf->set_count(12);
        break;
      }
    }
    emit(event_);
    if (i % kChurnEvents == kChurnEvents - 1) Churn(i, emit);
  }

 private:
  template <typename Emit>
  void Churn(uint64_t i, Emit&& emit) {
    // A worker thread (never a process's main thread) is replaced.
    size_t slot = 1 + (i / kChurnEvents) % (tids_.size() - 1);
    if (tids_[slot].first == tids_[slot].second) ++slot;
    auto& [pid, tid] = tids_[slot];
    Event e;
    e.set_ts_ns(ts_);
    e.set_pid(pid);
    e.set_tid(tid);
    e.mutable_thread_exit()->set_comm("pt_data_worker");
    emit(e);
    tid = next_tid_++;
    e.Clear();
    e.set_ts_ns(ts_);
    e.set_pid(pid);
    e.set_tid(tid);
    e.mutable_thread_start()->set_comm("pt_data_worker");
    emit(e);
  }

  uint64_t ts_;
  std::vector<std::pair<uint32_t, uint32_t>> tids_;
  uint32_t next_tid_ = 100'000;
  Event event_;
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t events = 200'000'000;
  uint64_t ring = 64ull << 20;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    bool ok = true;
    if (flag == "--events") {
      ok = absl::SimpleAtoi(argv[i + 1], &events);
    } else if (flag == "--ring") {
      ok = absl::SimpleAtoi(argv[i + 1], &ring);
    } else if (flag == "--dir") {
      dir = argv[i + 1];
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr, "usage: flight_recorder_memory [--events N] [--ring BYTES] [--dir DIR]\n");
      return 2;
    }
  }
  const std::string output = dir + "/flight_recorder_memory." + std::to_string(getpid()) + ".gpuos";
  gpuos::FlightRecorder::Options options;
  options.output_path = output;
  options.max_bytes = ring;
  auto flight = gpuos::FlightRecorder::Create(options);
  if (!flight.ok()) {
    fprintf(stderr, "%s\n", std::string(flight.status().message()).c_str());
    return 1;
  }
  gpuos::v1::TraceHeader header;
  header.mutable_start_clock()->set_monotonic_ns(1'000'000'000);
  if (auto s = (*flight)->WriteHeader(header); !s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  printf("# flight_recorder_memory: %llu events, a %llu MiB ring in %s\n", static_cast<unsigned long long>(events),
         static_cast<unsigned long long>(ring >> 20), dir.c_str());
  printf("%12s %14s %14s %12s %10s\n", "events", "peak_rss_kib", "rss_kib", "events/s", "segments");
  fflush(stdout);

  Job job(1'000'000'000);
  uint64_t fed = 0;
  auto emit = [&](const Event& e) {
    ++fed;
    if (auto s = (*flight)->Append(e); !s.ok()) {
      fprintf(stderr, "append failed: %s\n", std::string(s.message()).c_str());
      exit(1);
    }
  };
  job.Start(emit);
  const double start = Seconds();
  double last = start;
  uint64_t last_fed = fed;
  long peak_at_10m = 0;
  constexpr uint64_t kEvery = 10'000'000;
  for (uint64_t i = 0; fed < events; ++i) {
    job.Next(i, emit);
    if (fed / kEvery != (fed - 1) / kEvery || fed >= events) {
      const double now = Seconds();
      if (peak_at_10m == 0 && fed >= kEvery) {
        // A dump mid-run (as SIGUSR1 or a slow step makes one), so that the
        // figure at 10M holds what a dump costs, as the one at the end does.
        const double dump_start = Seconds();
        auto dump = (*flight)->Dump((*flight)->DumpPath(1), gpuos::v1::TraceTrailer(), "benchmark");
        if (!dump.ok()) {
          fprintf(stderr, "dump failed: %s\n", std::string(dump.status().message()).c_str());
          return 1;
        }
        printf("# dump at %llu events: %llu events in %.2f s\n", static_cast<unsigned long long>(fed),
               static_cast<unsigned long long>(dump->events), Seconds() - dump_start);
        unlink(dump->path.c_str());
        peak_at_10m = -1;  // read with the row below
      }
      const long peak = PeakRssKiB();
      if (peak_at_10m == -1) peak_at_10m = peak;
      printf("%12llu %14ld %14ld %12.0f %10zu\n", static_cast<unsigned long long>(fed), peak, CurrentRssKiB(),
             (fed - last_fed) / (now - last), (*flight)->segment_count());
      fflush(stdout);
      last = now;
      last_fed = fed;
    }
  }
  const double fed_s = Seconds() - start;
  const double dump_start = Seconds();
  gpuos::v1::TraceTrailer trailer;
  (*flight)->set_end_reason("the end of the benchmark");
  const uint64_t window = (*flight)->window_events();
  if (auto s = (*flight)->WriteTrailer(trailer); !s.ok()) {
    fprintf(stderr, "dump failed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const double dump_s = Seconds() - dump_start;
  const long peak_end = PeakRssKiB();
  printf("# fed %llu events in %.1f s: %.0f events/s\n", static_cast<unsigned long long>(fed), fed_s, fed / fed_s);
  printf("# final dump: %llu window events in %.2f s\n", static_cast<unsigned long long>(window), dump_s);
  if (peak_at_10m > 0) {
    printf("# peak RSS at 10M events (after a dump): %ld KiB; at the end (after the final dump): %ld KiB; %+.1f%%\n", peak_at_10m,
           peak_end, 100.0 * (peak_end - peak_at_10m) / peak_at_10m);
  } else {
    printf("# peak RSS at the end: %ld KiB (fewer than 10M events fed)\n", peak_end);
  }
  unlink(output.c_str());
  return 0;
}
