// The trace being recorded; see recording.h.
#include "record/recording.h"

#include <sys/epoll.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <optional>

#include <climits>
#include <string>

#include "analysis/step_options.h"
#include "common/path_name.h"
#include "common/valid_utf8.h"
#include "record/event_decoder.h"
#include "record/host_info.h"
#include "record/rank_environment.h"
#include "record/record_options.h"

namespace gpuos {
namespace {

}  // namespace

int OpenEventPoll(std::initializer_list<int> fds) {
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  for (int fd : fds) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  return epoll_fd;
}

void Recording::SetFlightRecorder(FlightRecorder* flight) {
  flight_ = flight;
  if (options_.flight_slow_step_factor > 0) {
    slow_steps_ = std::make_unique<SlowStepTrigger>(options_.flight_slow_step_factor);
  }
}

void Recording::DumpFlight(const std::string& reason) {
  if (flight_ == nullptr) return;
  v1::TraceTrailer trailer;
  *trailer.mutable_end_clock() = ReadClockPair();
  trailer.set_dropped_events(dropped());
  const std::string path = flight_->DumpPath(flight_->dumps() + 1);
  auto dumped = flight_->Dump(path, trailer, reason);
  if (!dumped.ok()) {
    fprintf(stderr, "gpuos-trace: flight recorder: cannot write %s (%s): %s\n", path.c_str(), reason.c_str(),
            std::string(dumped.status().message()).c_str());
    return;
  }
  if (!options_.quiet) {
    fprintf(stderr, "gpuos-trace: flight recorder: wrote the last %.3f s (%llu events) to %s (%s)\n",
            (dumped->end_ns - dumped->start_ns) / 1e9, static_cast<unsigned long long>(dumped->events),
            dumped->path.c_str(), reason.c_str());
  }
}

absl::Status Recording::Finish(v1::TraceTrailer trailer) {
  *trailer.mutable_end_clock() = ReadClockPair();
  trailer.set_dropped_events(dropped());
  // Flushed before the trailer is filled, so that a batch lost now is
  // counted in it.
  if (absl::Status s = writer_->Flush(); !s.ok()) NoteWriteError(s);
  const bool removed = writer_->Removed();
  trailer.set_events_written(writer_->events_written());
  if (const v1::TraceWriteFailure* failure = writer_->failure()) *trailer.mutable_write_failure() = *failure;
  absl::Status trailer_written = writer_->WriteTrailer(trailer);
  absl::Status closed = trailer_written.ok() ? writer_->Close() : trailer_written;
  if (!write_error_.ok()) closed = write_error_;
  if (const v1::TraceWriteFailure* failure = writer_->failure()) {
    fprintf(stderr, "gpuos-trace: writing %s failed: %s; %llu events lost; %s\n", options_.output_path.c_str(),
            failure->error().c_str(), static_cast<unsigned long long>(failure->lost_events()),
            removed                ? "nothing of the trace remains"
            : trailer_written.ok() ? "the trace says so and is marked incomplete"
                                   : "the trace has no trailer and reads as incomplete");
  } else if (!closed.ok()) {
    fprintf(stderr, "gpuos-trace: writing %s failed: %s\n", options_.output_path.c_str(),
            std::string(closed.message()).c_str());
  }
  if (flight_ != nullptr && closed.ok() && !options_.quiet) {
    const FlightRecorder::DumpResult& dump = flight_->last_dump();
    fprintf(stderr, "gpuos-trace: flight recorder: wrote the last %.3f s (%llu events; %llu earlier ones rotated out) to %s\n",
            (dump.end_ns - dump.start_ns) / 1e9, static_cast<unsigned long long>(dump.events),
            static_cast<unsigned long long>(flight_->events_rotated_out()), dump.path.c_str());
  }
  return closed;
}

absl::Status Recording::StartBpf() {
  BpfSessionOptions bpf_options;
  bpf_options.ring_buffer_bytes = options_.ring_buffer_bytes;
  bpf_options.fault_window_ns = options_.fault_window_ns;
  bpf_options.syscall_slots = options_.syscall_slots;
  bpf_options.btf_path = options_.btf_path;
  bpf_options.verbose = options_.verbose;
  bpf_options.quiet = options_.quiet;
  auto session = BpfSession::Start(
      bpf_options, [this](const void* data, size_t size) { OnRecord(data, size); });
  if (!session.ok()) return session.status();
  bpf_ = std::move(*session);
  if (BenchDetaches("torch_uprobes")) {
    fprintf(stderr, "gpuos-trace: warning: GPUOS_BENCH_DETACH: torch_uprobes not attached; no backward-pass marks\n");
    return absl::OkStatus();
  }
  // Backward passes of un-annotated PyTorch jobs; the rest records without.
  auto torch = TorchBackwardProbes::Load(*bpf_);
  if (torch.ok()) {
    torch_ = std::move(*torch);
  } else if (!options_.quiet) {
    fprintf(stderr, "gpuos-trace: warning: %s; no backward-pass marks without the Python hook\n",
            std::string(torch.status().message()).c_str());
  }
  return absl::OkStatus();
}

void Recording::AddRoot(pid_t pid, const std::string& argv0) {
  v1::Event event;
  event.set_ts_ns(MonotonicNowNs());
  event.set_pid(pid);
  event.set_tid(pid);
  auto* start = event.mutable_process_start();
  start->set_ppid(getpid());
  start->set_parent_tid(getpid());
  start->set_comm(ValidUtf8(Basename(argv0).substr(0, 15)));
  start->set_is_root(true);
  Track(event);
  Write(event);
}

void Recording::OnRecord(const void* data, size_t size) {
  DecodeResult result = DecodeBpfRecord(data, size, &event_, [this](v1::Event& event) {
    if (event.ts_ns() > bpf_window_end_ns_) return;
    // A process or thread born just before the window opened is kept:
    // later events of it need its start (and name).
    if (event.ts_ns() < bpf_window_start_ns_ && !event.has_process_start() &&
        !event.has_thread_start() && !event.has_exec() && !event.has_comm_change()) {
      return;
    }
    Track(event);
    Write(event);
    if (torch_) torch_->OnEvent(event);
    // The environment of the new image names its rank, if any.
    if (event.has_exec()) NoteRank(event.pid(), event.ts_ns());
  });
  if (result != DecodeResult::kOk) ++undecodable_;
  // Right after the record that mapped it: a LibTorch program's first
  // backward pass may come soon after its loader mapped libtorch.
  if (torch_) torch_->CheckPending();
}

void Recording::Snapshot(bool final) {
  uint64_t now = MonotonicNowNs();
  v1::Event event;
  const KernelSyscallTables tables = bpf_->ReadSyscallTables();
  for (const KernelSyscallTotal& t : tables.totals) {
    uint64_t& seen = syscall_calls_seen_[{t.tid, t.nr}];
    if (seen == t.calls) continue;
    seen = t.calls;
    event.Clear();
    event.set_ts_ns(now);
    event.set_pid(t.pid);
    event.set_tid(t.tid);
    auto* s = event.mutable_syscall_stats();
    s->set_nr(t.nr);
    s->set_calls(t.calls);
    s->set_total_ns(t.total_ns);
    s->set_max_ns(t.max_ns);
    Write(event);
  }
  for (const KernelFutexWakes& w : tables.wakes) {
    uint64_t& seen = wake_calls_seen_[w.tid];
    if (seen == w.calls) continue;
    seen = w.calls;
    event.Clear();
    event.set_ts_ns(now);
    event.set_pid(w.pid);
    event.set_tid(w.tid);
    auto* f = event.mutable_futex_wakes();
    f->set_calls(w.calls);
    f->set_woken(w.woken);
    Write(event);
  }
  KernelDrops drops = bpf_->ReadDrops();
  for (const auto& [program, misses] : bpf_->ReadRecursionMisses()) {
    drops.by_reason.emplace_back("recursion:" + program, misses);
    drops.total += misses;
  }
  if (final || drops.total != drops_total_ || undecodable_ != undecodable_reported_) {
    drops_total_ = drops.total;
    undecodable_reported_ = undecodable_;
    event.Clear();
    event.set_ts_ns(now);
    auto* stats = event.mutable_tracer_stats();
    for (const auto& [reason, count] : drops.by_reason) {
      if (reason.rfind("ringbuf:", 0) == 0) {
        (*stats->mutable_ring_buffer_drops())[reason.substr(8)] = count;
      } else if (reason.rfind("map_full:", 0) == 0) {
        (*stats->mutable_map_full_drops())[reason.substr(9)] = count;
      } else {
        // Skipped program runs: events that never reached the ring.
        (*stats->mutable_ring_buffer_drops())[reason] = count;
      }
    }
    if (undecodable_) (*stats->mutable_ring_buffer_drops())["undecodable"] = undecodable_;
    stats->set_events_written(writer_->events_written());
    Write(event);
  }
  if (!final && !exited_tids_.empty()) {
    bpf_->ForgetThreads(exited_tids_);
    for (uint32_t tid : exited_tids_) {
      wake_calls_seen_.erase(tid);
      for (auto it = syscall_calls_seen_.lower_bound({tid, INT32_MIN});
           it != syscall_calls_seen_.end() && it->first.first == tid;) {
        it = syscall_calls_seen_.erase(it);
      }
    }
    exited_tids_.clear();
  }
  if (absl::Status s = writer_->Flush(); !s.ok()) NoteWriteError(s);
}

void Recording::OnShimEvent(const v1::Event& event) {
  ++shim_events_;
  if (event.has_shim_stats()) shim_status_[event.pid()] = event.shim_stats();
  if (event.has_gpu_kernel()) ++kernels_by_pid_[event.pid()];
  Write(event);
  if (event.has_nvtx_range() && event.nvtx_range().domain() == kPythonHookDomain) NoteRankMark(event);
  if (slow_steps_) {
    if (std::optional<std::string> slow = slow_steps_->Observe(event)) DumpFlight(*slow);
  }
}

void Recording::Track(v1::Event& event) {
  switch (event.payload_case()) {
    case v1::Event::kProcessStart:
      live_processes_.insert(event.pid());
      ranked_pids_.erase(event.pid());  // a reused pid
      ++processes_seen_;
      ++threads_seen_;
      thread_pid_[event.tid()] = event.pid();
      break;
    case v1::Event::kThreadStart:
      ++threads_seen_;
      thread_pid_[event.tid()] = event.pid();
      break;
    case v1::Event::kCommChange:
      if (event.pid() == 0) {
        auto it = thread_pid_.find(event.tid());
        if (it != thread_pid_.end()) event.set_pid(it->second);
      }
      break;
    case v1::Event::kExec:
      if (event.exec().old_tid() != event.pid()) {
        thread_pid_.erase(event.exec().old_tid());
        thread_pid_[event.pid()] = event.pid();
      }
      break;
    case v1::Event::kProcessExit:
      live_processes_.erase(event.pid());
      break;
    case v1::Event::kThreadExit:
      thread_pid_.erase(event.tid());
      exited_tids_.push_back(event.tid());
      break;
    default:
      break;
  }
}

void Recording::Write(const v1::Event& event) {
  if (!write_error_.ok()) {
    writer_->CountLost(event);
    return;
  }
  if (absl::Status s = writer_->Append(event); !s.ok()) NoteWriteError(s);
}

void Recording::NoteWriteError(const absl::Status& status) {
  if (write_error_.ok()) write_error_ = status;
}

void Recording::AddExistingProcess(pid_t pid, pid_t ppid, const std::string& comm,
                                   uint64_t ts_ns) {
  v1::Event event;
  event.set_ts_ns(ts_ns);
  event.set_pid(pid);
  event.set_tid(pid);
  auto* start = event.mutable_process_start();
  start->set_ppid(ppid);
  start->set_comm(ValidUtf8(comm.substr(0, 15)));
  start->set_preexisting(true);
  Track(event);
  Write(event);
  if (torch_) {
    torch_->Watch(pid);
    torch_->CheckPending();
  }
  NoteRank(static_cast<uint32_t>(pid), ts_ns);
}

const std::string& Recording::Host() {
  if (host_.empty()) {
    struct utsname uts {};
    host_ = uname(&uts) == 0 ? ValidUtf8(uts.nodename) : "?";
  }
  return host_;
}

void Recording::NoteRank(uint32_t pid, uint64_t ts_ns) {
  std::optional<v1::RankInfo> rank = ReadRankInfo(static_cast<pid_t>(pid), Host());
  if (rank) WriteRank(pid, ts_ns, *std::move(rank));
}

void Recording::NoteRankMark(const v1::Event& event) {
  if (ranked_pids_.count(event.pid())) return;  // its environment said it
  std::optional<v1::RankInfo> rank = ParseRankMark(event.nvtx_range().name());
  if (!rank) return;
  rank->set_host(Host());
  WriteRank(event.pid(), event.ts_ns(), *std::move(rank));
}

void Recording::WriteRank(uint32_t pid, uint64_t ts_ns, v1::RankInfo info) {
  v1::Event event;
  event.set_ts_ns(ts_ns);
  event.set_pid(pid);
  event.set_tid(pid);
  // Only a rank number counts: a launcher may set WORLD_SIZE alone, and the
  // hook's mark from the process it spawns must still be read.
  if (info.has_rank()) ranked_pids_.insert(pid);
  *event.mutable_rank_info() = std::move(info);
  Write(event);
}

void Recording::AddExistingThread(pid_t pid, pid_t tid, const std::string& comm, uint64_t ts_ns) {
  v1::Event event;
  event.set_ts_ns(ts_ns);
  event.set_pid(pid);
  event.set_tid(tid);
  auto* start = event.mutable_thread_start();
  start->set_comm(ValidUtf8(comm.substr(0, 15)));
  start->set_preexisting(true);
  Track(event);
  Write(event);
  if (torch_) {
    torch_->Watch(pid);
    torch_->CheckPending();
  }
}

}  // namespace gpuos
