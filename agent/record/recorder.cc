// The recording loop; see recorder.h.
#include "record/recorder.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "record/bpf_session.h"
#include "record/event_decoder.h"
#include "record/host_info.h"
#include "record/launcher.h"
#include "record/preflight.h"
#include "record/shim_listener.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

// The agent drains the ring buffer on this timer; the kernel side wakes it
// sooner only when the buffer fills up (common.bpf.h: wakeup_bytes).
constexpr int kTickMs = 50;
constexpr uint64_t kSnapshotIntervalNs = 1'000'000'000;

void PrintError(const absl::Status& status) {
  fprintf(stderr, "gpuos-trace: %s\n", std::string(status.message()).c_str());
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Everything the loop needs while it runs.  Memory grows with the number of
// threads and kernel-map entries, never with the number of events: events go
// straight to the writer.
class Recording {
 public:
  Recording(const RecordOptions& options, TraceWriter* writer)
      : options_(options), writer_(writer) {}

  absl::Status StartBpf() {
    BpfSessionOptions bpf_options;
    bpf_options.ring_buffer_bytes = options_.ring_buffer_bytes;
    bpf_options.fault_window_ns = options_.fault_window_ns;
    bpf_options.btf_path = options_.btf_path;
    bpf_options.verbose = options_.verbose;
    auto session = BpfSession::Start(
        bpf_options, [this](const void* data, size_t size) { OnRecord(data, size); });
    if (!session.ok()) return session.status();
    bpf_ = std::move(*session);
    return absl::OkStatus();
  }

  BpfSession& bpf() { return *bpf_; }

  // The process gpuos-trace started: the kernel side never saw it being
  // created, so its start is written here.
  void AddRoot(pid_t pid, const std::string& argv0) {
    v1::Event event;
    event.set_ts_ns(MonotonicNowNs());
    event.set_pid(pid);
    event.set_tid(pid);
    auto* start = event.mutable_process_start();
    start->set_ppid(getpid());
    start->set_parent_tid(getpid());
    start->set_comm(Basename(argv0).substr(0, 15));
    start->set_is_root(true);
    Track(event);
    Write(event);
  }

  void OnRecord(const void* data, size_t size) {
    DecodeResult result = DecodeBpfRecord(data, size, &event_);
    if (result != DecodeResult::kOk) {
      ++undecodable_;
      return;
    }
    Track(event_);
    Write(event_);
  }

  // Writes the kernel-side totals (syscalls, futex wakes, drops) that changed
  // since the last snapshot; then frees the map entries of exited threads.
  void Snapshot(bool final) {
    uint64_t now = MonotonicNowNs();
    v1::Event event;
    for (const KernelSyscallTotal& t : bpf_->ReadSyscallTotals()) {
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
    for (const KernelFutexWakes& w : bpf_->ReadFutexWakes()) {
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

  // An event from the CUDA shim, already checked to come from the tree.
  void OnShimEvent(const v1::Event& event) {
    ++shim_events_;
    if (event.has_shim_stats()) shim_status_[event.pid()] = event.shim_stats();
    Write(event);
  }

  // The last word of each process's shim (CUPTI stepping aside, drops).
  const std::map<uint32_t, v1::ShimStats>& shim_status() const { return shim_status_; }

  uint64_t shim_events() const { return shim_events_; }
  uint64_t dropped() const { return drops_total_ + undecodable_; }
  size_t processes_seen() const { return processes_seen_; }
  size_t threads_seen() const { return threads_seen_; }
  const absl::Status& write_error() const { return write_error_; }

 private:
  // Keeps the tid -> pid table that comm changes by another process need,
  // and the list of exited threads whose map entries can go.
  void Track(v1::Event& event) {
    switch (event.payload_case()) {
      case v1::Event::kProcessStart:
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
      case v1::Event::kThreadExit:
        thread_pid_.erase(event.tid());
        exited_tids_.push_back(event.tid());
        break;
      default:
        break;
    }
  }

  void Write(const v1::Event& event) {
    if (!write_error_.ok()) return;
    if (absl::Status s = writer_->Append(event); !s.ok()) NoteWriteError(s);
  }

  void NoteWriteError(const absl::Status& status) {
    if (write_error_.ok()) write_error_ = status;
  }

  const RecordOptions& options_;
  TraceWriter* writer_;
  std::unique_ptr<BpfSession> bpf_;
  v1::Event event_;  // reused: no allocation per record
  absl::flat_hash_map<uint32_t, uint32_t> thread_pid_;
  std::vector<uint32_t> exited_tids_;
  std::map<std::pair<uint32_t, int32_t>, uint64_t> syscall_calls_seen_;
  absl::flat_hash_map<uint32_t, uint64_t> wake_calls_seen_;
  uint64_t drops_total_ = 0;
  uint64_t undecodable_ = 0;
  uint64_t undecodable_reported_ = 0;
  uint64_t shim_events_ = 0;
  std::map<uint32_t, v1::ShimStats> shim_status_;
  size_t processes_seen_ = 0;
  size_t threads_seen_ = 0;
  absl::Status write_error_;
};

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The shim sits next to the binary in a build tree, or in
// <prefix>/lib/gpuos-trace next to <prefix>/bin once installed.
std::string FindShim(const std::string& requested) {
  if (!requested.empty()) return access(requested.c_str(), R_OK) == 0 ? requested : "";
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  exe[n] = 0;
  std::string dir = Dirname(exe);
  for (const std::string& candidate :
       {dir + "/libgpuos_shim.so", dir + "/../lib/gpuos-trace/libgpuos_shim.so"}) {
    if (access(candidate.c_str(), R_OK) == 0) {
      char resolved[4096];
      return realpath(candidate.c_str(), resolved) ? resolved : candidate;
    }
  }
  return "";
}

std::string ExeDir() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  exe[n] = 0;
  return Dirname(exe);
}

// The directory holding the Python start-up hook, or "".
std::string FindPythonHooks() {
  std::string dir = ExeDir();
  for (const std::string& candidate :
       {dir + "/python_hooks", dir + "/../share/gpuos-trace/python_hooks"}) {
    if (access((candidate + "/sitecustomize.py").c_str(), R_OK) == 0) {
      char resolved[4096];
      return realpath(candidate.c_str(), resolved) ? resolved : candidate;
    }
  }
  return "";
}

// Environment that puts the shim into every process of the tree.
std::vector<std::string> ShimEnvironment(const std::string& shim, const std::string& socket_path) {
  std::vector<std::string> env;
  const char* preload = getenv("LD_PRELOAD");
  env.push_back("LD_PRELOAD=" + shim + (preload && *preload ? std::string(" ") + preload : ""));
  for (const char* name : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"}) {
    const char* existing = getenv(name);
    if (existing && *existing && shim != existing) {
      // Another tool (Nsight Systems?) is injected: leave it in place.
      fprintf(stderr, "gpuos-trace: warning: %s is already set to %s; keeping it, so %s events "
              "are not recorded\n", name, existing,
              std::string(name).rfind("CUDA", 0) == 0 ? "CUDA" : "NVTX");
      continue;
    }
    env.push_back(std::string(name) + "=" + shim);
  }
  env.push_back("GPUOS_SHIM_SOCKET=" + socket_path);
  return env;
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.1f GiB", bytes / double(1ull << 30));
  if (bytes >= (1ull << 20)) return absl::StrFormat("%.1f MiB", bytes / double(1ull << 20));
  if (bytes >= (1ull << 10)) return absl::StrFormat("%.1f KiB", bytes / double(1ull << 10));
  return absl::StrFormat("%d B", bytes);
}

}  // namespace

int RunRecord(const RecordOptions& options) {
  for (absl::Status status : {CheckPrivileges(), CheckKernelBtf(options.btf_path), EnsureTracefs()}) {
    if (!status.ok()) {
      PrintError(status);
      return 1;
    }
  }
  auto run_as = ResolveRunAs(options.run_as_root);
  if (!run_as.ok()) {
    PrintError(run_as.status());
    return 1;
  }

  auto writer = TraceWriter::Create(options.output_path);
  if (!writer.ok()) {
    PrintError(writer.status());
    return 1;
  }
  if (run_as->drop_privileges && fchown((*writer)->fd(), run_as->uid, run_as->gid) != 0) {
    fprintf(stderr, "gpuos-trace: warning: cannot give %s to uid %u: %s\n",
            options.output_path.c_str(), run_as->uid, strerror(errno));
  }

  Recording recording(options, writer->get());
  if (absl::Status s = recording.StartBpf(); !s.ok()) {
    PrintError(s);
    unlink(options.output_path.c_str());
    return 1;
  }

  auto signal_fd = OpenSignalFd();
  if (!signal_fd.ok()) {
    PrintError(signal_fd.status());
    return 1;
  }

  LaunchOptions launch;
  launch.argv = options.command;
  launch.run_as = *run_as;

  std::unique_ptr<ShimListener> shim_listener;
  if (options.cuda) {
    std::string shim = FindShim(options.shim_path);
    if (shim.empty()) {
      fprintf(stderr, "gpuos-trace: warning: %s; recording OS events only\n",
              options.shim_path.empty()
                  ? "the CUDA shim (libgpuos_shim.so) is not installed next to gpuos-trace"
                  : ("cannot read the CUDA shim " + options.shim_path).c_str());
    } else {
      uid_t owner = run_as->drop_privileges ? run_as->uid : getuid();
      gid_t group = run_as->drop_privileges ? run_as->gid : getgid();
      pid_t self = getpid();
      auto listener = ShimListener::Create(
          owner, group,
          [owner, self](pid_t pid, uid_t uid) {
            return (uid == owner || uid == 0) && pid != self && IsDescendantOf(pid, self);
          },
          [&recording](const v1::Event& event) { recording.OnShimEvent(event); });
      if (!listener.ok()) {
        fprintf(stderr, "gpuos-trace: warning: %s; recording OS events only\n",
                std::string(listener.status().message()).c_str());
      } else {
        shim_listener = std::move(*listener);
        launch.extra_env = ShimEnvironment(shim, shim_listener->socket_path());
        std::string hooks = options.python_hooks ? FindPythonHooks() : "";
        if (!hooks.empty()) {
          const char* path = getenv("PYTHONPATH");
          launch.extra_env.push_back("PYTHONPATH=" + hooks +
                                     (path && *path ? std::string(":") + path : ""));
        }
      }
    }
  }
  auto command = LaunchedCommand::Prepare(launch);
  if (!command.ok()) {
    PrintError(command.status());
    return 1;
  }
  pid_t root = (*command)->pid();

  v1::TraceHeader header;
  FillHostInfo(&header);
  header.set_tracer_version(GPUOS_VERSION);
  for (const auto& arg : options.command) header.add_command_line(arg);
  for (const auto& arg : options.tracer_argv) header.add_tracer_argv(arg);
  header.set_tracer_pid(getpid());
  header.set_root_pid(root);
  header.set_run_as_uid(run_as->drop_privileges ? run_as->uid : getuid());
  header.set_run_as_gid(run_as->drop_privileges ? run_as->gid : getgid());
  header.set_fault_window_ns(options.fault_window_ns);
  header.set_ring_buffer_bytes(options.ring_buffer_bytes);
  if (absl::Status s = (*writer)->WriteHeader(header); !s.ok()) {
    PrintError(s);
    return 1;
  }

  // Registered before it execs: nothing the command does is missed.
  if (absl::Status s = recording.bpf().Track(root); !s.ok()) {
    PrintError(s);
    return 1;
  }
  recording.AddRoot(root, options.command[0]);
  uint64_t start_ns = MonotonicNowNs();
  if (absl::Status s = (*command)->Release(); !s.ok()) PrintError(s);

  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = recording.bpf().ring_buffer_fd();
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev);
  ev.data.fd = *signal_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev);
  if (shim_listener) {
    ev.data.fd = shim_listener->poll_fd();
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev);
  }

  bool tree_done = (*command)->ReapChildren();
  uint64_t last_snapshot = MonotonicNowNs();
  while (!tree_done) {
    epoll_event ready[3];
    int n = epoll_wait(epoll_fd, ready, 3, kTickMs);
    if (n < 0 && errno != EINTR) break;
    if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
    if (shim_listener) shim_listener->Pump();
    signalfd_siginfo info{};
    while (read(*signal_fd, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo == SIGCHLD) continue;  // reaped below
      if (ShouldForwardSignal(info.ssi_code)) (*command)->Forward(static_cast<int>(info.ssi_signo));
    }
    tree_done = (*command)->ReapChildren();
    uint64_t now = MonotonicNowNs();
    if (now - last_snapshot >= kSnapshotIntervalNs) {
      recording.Snapshot(/*final=*/false);
      last_snapshot = now;
    }
  }
  close(epoll_fd);
  uint64_t end_ns = MonotonicNowNs();

  // The tree is gone: whatever is in the ring buffer is all there will be.
  if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
  if (shim_listener) shim_listener->Pump(/*until_closed=*/true);
  recording.Snapshot(/*final=*/true);

  int exit_code = (*command)->exit_code();
  v1::TraceTrailer trailer;
  *trailer.mutable_end_clock() = ReadClockPair();
  if ((*command)->wait_status()) {
    trailer.set_root_exited(true);
    trailer.set_root_wait_status(*(*command)->wait_status());
  }
  trailer.set_dropped_events(recording.dropped());
  trailer.set_events_written((*writer)->events_written());
  absl::Status closed = (*writer)->WriteTrailer(trailer);
  if (closed.ok()) closed = (*writer)->Close();
  if (!recording.write_error().ok()) closed = recording.write_error();

  if (!closed.ok()) {
    fprintf(stderr, "gpuos-trace: writing %s failed: %s\n", options.output_path.c_str(),
            std::string(closed.message()).c_str());
  }
  if (!options.quiet) {
    fprintf(stderr,
            "gpuos-trace: %s exited with %d after %.3f s; recorded %llu events from %zu "
            "processes, %zu threads\n",
            Basename(options.command[0]).c_str(), exit_code, (end_ns - start_ns) / 1e9,
            static_cast<unsigned long long>((*writer)->events_written()),
            recording.processes_seen(), recording.threads_seen());
    if (shim_listener && shim_listener->connections()) {
      fprintf(stderr, "gpuos-trace: %llu NVTX/CUDA events from %llu process(es) through the shim\n",
              static_cast<unsigned long long>(recording.shim_events()),
              static_cast<unsigned long long>(shim_listener->connections()));
    }
    for (const auto& [pid, stats] : recording.shim_status()) {
      if (!stats.cupti_active() && !stats.cupti_status().empty() &&
          stats.cupti_status().find("no gpuos-trace agent") == std::string::npos) {
        fprintf(stderr, "gpuos-trace: note: pid %u: %s\n", pid, stats.cupti_status().c_str());
      }
      uint64_t lost = stats.dropped_queue_full() + stats.dropped_send_failed() + stats.cupti_dropped_records();
      if (lost) {
        fprintf(stderr, "gpuos-trace: WARNING: pid %u: the CUDA shim lost %llu events\n", pid,
                static_cast<unsigned long long>(lost));
      }
    }
    if (shim_listener && shim_listener->rejected_peers()) {
      fprintf(stderr, "gpuos-trace: WARNING: refused %llu shim connection(s) from outside the traced tree\n",
              static_cast<unsigned long long>(shim_listener->rejected_peers()));
    }
    if (recording.dropped()) {
      fprintf(stderr,
              "gpuos-trace: WARNING: %llu events were dropped (ring buffer or kernel map full); "
              "try a larger --buffer-size\n",
              static_cast<unsigned long long>(recording.dropped()));
    }
    struct stat st {};
    stat(options.output_path.c_str(), &st);
    fprintf(stderr, "gpuos-trace: trace written to %s (%s); see: gpuos-trace report %s\n",
            options.output_path.c_str(), HumanBytes(static_cast<uint64_t>(st.st_size)).c_str(),
            options.output_path.c_str());
  }
  return exit_code;
}

}  // namespace gpuos
