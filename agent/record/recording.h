// The trace being recorded; the session that drives it, launched or
// attached, is recording_session.h.  Decodes ring-buffer records, keeps the
// little per-thread state the stream needs (tid -> pid, exited threads),
// writes every event to its sink (the .gpuos file, or the flight
// recorder's ring: stream/event_sink.h), and every second writes the
// totals kept in kernel maps (syscalls, futex wakes, drops).  Memory grows
// with the number of threads and kernel-map entries, never with the number
// of events: events go straight to the writer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <climits>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "gpuos_trace.pb.h"
#include "record/bpf_session.h"
#include "record/slow_step_trigger.h"
#include "record/torch_backward_probes.h"
#include "stream/event_sink.h"
#include "stream/flight_recorder.h"

namespace gpuos {

struct RecordOptions;

// An epoll set watching `fds` for input (negative ones are skipped): the
// ring buffer, the signalfd, the shim listener of a recording loop.
int OpenEventPoll(std::initializer_list<int> fds);

class Recording {
 public:
  Recording(const RecordOptions& options, EventSink* writer)
      : options_(options), writer_(writer) {}

  // --flight-recorder: `writer` is this ring; DumpFlight() writes it out,
  // and so does a slow step when --flight-trigger asks for it.
  void SetFlightRecorder(FlightRecorder* flight);
  // Writes the flight recorder's window to its next dump file now, and says
  // so on stderr.  `reason` goes in the file ("SIGUSR1", "slow step: ...").
  void DumpFlight(const std::string& reason);

  absl::Status StartBpf();
  BpfSession& bpf() { return *bpf_; }
  // Detaches every BPF program, records what the kernel side still held,
  // and frees the maps (the end of a recording, after its last Snapshot).
  void StopBpf() {
    if (torch_) torch_->Detach();  // before the session's final drain
    if (!bpf_) return;
    bpf_->DetachAndDrain();
    bpf_.reset();
  }

  // The process gpuos-trace started: the kernel side never saw it being
  // created, so its start is written here.
  void AddRoot(pid_t pid, const std::string& argv0);

  // A process or thread that was already running when gpuos-trace attached
  // (found in /proc): written as a start with `preexisting` set.
  void AddExistingProcess(pid_t pid, pid_t ppid, const std::string& comm, uint64_t ts_ns);
  void AddExistingThread(pid_t pid, pid_t tid, const std::string& comm, uint64_t ts_ns);

  void OnRecord(const void* data, size_t size);

  // Attach mode's window: kernel events that start before `start_ns` (a
  // process tracked a moment before the others) or after `end_ns` are left
  // out, so the trace covers exactly the attach window.
  void SetBpfEventWindow(uint64_t start_ns, uint64_t end_ns) {
    bpf_window_start_ns_ = start_ns;
    bpf_window_end_ns_ = end_ns;
  }

  // Processes seen starting (or found at attach) and not seen exiting.
  const std::set<uint32_t>& live_processes() const { return live_processes_; }
  bool KnowsThread(uint32_t tid) const { return thread_pid_.contains(tid); }

  // Writes the kernel-side totals (syscalls, futex wakes, drops) that changed
  // since the last snapshot; then frees the map entries of exited threads.
  void Snapshot(bool final);

  // An event from the CUDA shim, already checked to come from the tree.
  void OnShimEvent(const v1::Event& event);

  // Writes an event made by the agent itself.
  void Write(const v1::Event& event);

  // Ends the file: fills the trailer's end clock, drops and event count
  // (the caller sets what is particular to its mode), writes it and closes.
  // A failure, of this or of any earlier write, is printed as one line and
  // returned.
  absl::Status Finish(v1::TraceTrailer trailer);

  // The backward-pass uprobes on libtorch (null when they could not be
  // loaded): what they probed, for the summary.
  const TorchBackwardProbes* torch_probes() const { return torch_.get(); }

  // The last word of each process's shim (CUPTI stepping aside, drops).
  const std::map<uint32_t, v1::ShimStats>& shim_status() const { return shim_status_; }

  uint64_t shim_events() const { return shim_events_; }
  uint64_t dropped() const { return drops_total_ + undecodable_; }
  size_t processes_seen() const { return processes_seen_; }
  size_t threads_seen() const { return threads_seen_; }
  const absl::Status& write_error() const { return write_error_; }
  // Kernels the shim reported, per process (attach mode's summary).
  const std::map<uint32_t, uint32_t>& kernels_by_pid() const { return kernels_by_pid_; }

 private:
  void Track(v1::Event& event);
  // Writes a RankInfo event for `pid` when its environment names a rank.
  void NoteRank(uint32_t pid, uint64_t ts_ns);
  // The same from the Python hook's rank mark, for a process whose
  // environment named none.
  void NoteRankMark(const v1::Event& event);
  void WriteRank(uint32_t pid, uint64_t ts_ns, v1::RankInfo info);
  const std::string& Host();
  void NoteWriteError(const absl::Status& status);

  const RecordOptions& options_;
  EventSink* writer_;
  FlightRecorder* flight_ = nullptr;
  std::unique_ptr<SlowStepTrigger> slow_steps_;
  std::unique_ptr<BpfSession> bpf_;
  std::unique_ptr<TorchBackwardProbes> torch_;
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
  std::map<uint32_t, uint32_t> kernels_by_pid_;
  std::set<uint32_t> live_processes_;
  uint64_t bpf_window_start_ns_ = 0;
  uint64_t bpf_window_end_ns_ = UINT64_MAX;
  size_t processes_seen_ = 0;
  size_t threads_seen_ = 0;
  absl::Status write_error_;
  std::string host_;  // for RankInfo, read once
  std::set<uint32_t> ranked_pids_;  // a RankInfo written
};

}  // namespace gpuos
