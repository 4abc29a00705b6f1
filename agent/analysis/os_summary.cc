// Folds a trace's OS events into per-process, per-thread and per-syscall
// totals (see os_summary.h).  Events arrive roughly, not strictly, in time
// order, so anything that is "the latest" (names, cumulative snapshots) is
// decided by timestamp, with file order breaking ties.
#include "analysis/os_summary.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "stream/trace_completeness.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

constexpr int kCauseCount = 5;

// A cumulative snapshot and when it was taken.
struct SyscallSnapshot {
  uint64_t ts_ns = 0;
  uint64_t calls = 0;
  uint64_t total_ns = 0;
  uint64_t max_ns = 0;
};
struct WakeSnapshot {
  uint64_t ts_ns = 0;
  uint64_t calls = 0;
  uint64_t woken = 0;
};

// A name and when it was given, so that a late-arriving older event cannot
// overwrite a newer name.
struct TimedName {
  std::string name;
  uint64_t ts_ns = 0;
  bool set = false;
  void Offer(const std::string& candidate, uint64_t ts) {
    if (candidate.empty()) return;
    if (set && ts < ts_ns) return;
    name = candidate;
    ts_ns = ts;
    set = true;
  }
};

struct ThreadState {
  ThreadSummary summary;
  TimedName comm;
  // Keyed by the tid the kernel reported them under: after an exec merges
  // the exec'ing thread into the main thread, both series live here.
  std::map<std::pair<uint32_t, int32_t>, SyscallSnapshot> syscalls;
  std::map<uint32_t, WakeSnapshot> wakes;
};

struct ProcessState {
  ProcessSummary summary;
  TimedName start_comm;  // from ProcessStart / ProcessExit, when no main thread name
  std::vector<ThreadState> threads;
  // tid -> index in `threads` of the current (latest) thread with that tid.
  absl::flat_hash_map<uint32_t, size_t> by_tid;
  // Threads that exec'ed and became the main thread: their old tid now
  // means the main thread (for late events about their past).
  std::set<uint32_t> exec_aliases;
};

// Keeps the earliest known (non-zero) timestamp in `first`.
void SeenAt(uint64_t& first, uint64_t ts) {
  if (ts && (!first || ts < first)) first = ts;
}

void AddCall(CallTotals& totals, uint64_t bytes, uint64_t duration_ns) {
  ++totals.calls;
  totals.bytes += bytes;
  totals.total_ns += duration_ns;
  totals.max_ns = std::max(totals.max_ns, duration_ns);
}

void AddBlockIo(BlockIoTotals& totals, const v1::BlockIo& io) {
  ++totals.requests;
  totals.bytes += io.bytes();
  totals.total_ns += io.duration_ns();
}

void MergeBlockIo(BlockIoTotals& into, const BlockIoTotals& from) {
  into.requests += from.requests;
  into.bytes += from.bytes;
  into.total_ns += from.total_ns;
}

void MergeCalls(CallTotals& into, const CallTotals& from) {
  into.calls += from.calls;
  into.bytes += from.bytes;
  into.total_ns += from.total_ns;
  into.max_ns = std::max(into.max_ns, from.max_ns);
}

// Folds `from` (the thread that called execve) into `into` (the main thread
// it became).  Totals add up; names and snapshots keep the newest.
void MergeThread(ThreadState& into, ThreadState&& from) {
  ThreadSummary& a = into.summary;
  const ThreadSummary& b = from.summary;
  if (b.first_seen_ns && (!a.first_seen_ns || b.first_seen_ns < a.first_seen_ns)) {
    a.first_seen_ns = b.first_seen_ns;
  }
  a.voluntary_switches += b.voluntary_switches;
  a.involuntary_switches += b.involuntary_switches;
  a.off_cpu_ns += b.off_cpu_ns;
  a.runqueue_ns += b.runqueue_ns;
  for (int i = 0; i < kCauseCount; ++i) a.off_cpu_by_cause_ns[i] += b.off_cpu_by_cause_ns[i];
  a.page_faults += b.page_faults;
  a.major_page_faults += b.major_page_faults;
  MergeCalls(a.mmap, b.mmap);
  MergeCalls(a.munmap, b.munmap);
  MergeCalls(a.futex_wait, b.futex_wait);
  MergeBlockIo(a.block_io, b.block_io);
  if (from.comm.set) into.comm.Offer(from.comm.name, from.comm.ts_ns);
  for (auto& [key, snap] : from.syscalls) {
    auto [it, inserted] = into.syscalls.emplace(key, snap);
    if (!inserted && snap.ts_ns >= it->second.ts_ns) it->second = snap;
  }
  for (auto& [key, snap] : from.wakes) {
    auto [it, inserted] = into.wakes.emplace(key, snap);
    if (!inserted && snap.ts_ns >= it->second.ts_ns) it->second = snap;
  }
}

}  // namespace

struct OsSummaryBuilder::Impl {
  v1::TraceHeader header;
  bool has_trailer = false;
  v1::TraceTrailer trailer;
  uint64_t events = 0;
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  uint64_t unseen_switch_ins = 0;
  uint64_t unseen_switch_ins_ended_running = 0;
  uint64_t unseen_switch_ins_ended_by_run_time = 0;

  bool has_tracer_stats = false;
  uint64_t tracer_stats_ts = 0;
  v1::TracerStats tracer_stats;

  BlockIoTotals block_io;
  BlockIoTotals block_io_unattributed;

  std::vector<ProcessState> processes;
  // pid -> index in `processes` of the current process with that pid.
  absl::flat_hash_map<uint32_t, size_t> by_pid;

  ProcessState& Process(uint32_t pid, uint64_t ts) {
    auto it = by_pid.find(pid);
    if (it != by_pid.end()) {
      ProcessState& p = processes[it->second];
      SeenAt(p.summary.start_ns, ts);
      return p;
    }
    by_pid[pid] = processes.size();
    ProcessState& p = processes.emplace_back();
    p.summary.pid = pid;
    p.summary.start_ns = ts;
    p.summary.is_root = header.root_pid() != 0 && pid == header.root_pid();
    return p;
  }

  // A process whose pid was reused after it exited gets a new entry.
  ProcessState& ProcessForStart(uint32_t pid, uint64_t ts) {
    auto it = by_pid.find(pid);
    if (it != by_pid.end()) {
      const ProcessState& old = processes[it->second];
      if (!(old.summary.exited && ts > old.summary.exit_ns)) return processes[it->second];
      by_pid.erase(it);
    }
    return Process(pid, ts);
  }

  ThreadState& Thread(ProcessState& p, uint32_t tid, uint64_t ts) {
    if (p.exec_aliases.count(tid)) tid = p.summary.pid;
    auto it = p.by_tid.find(tid);
    if (it != p.by_tid.end()) {
      ThreadState& t = p.threads[it->second];
      SeenAt(t.summary.first_seen_ns, ts);
      return t;
    }
    p.by_tid[tid] = p.threads.size();
    ThreadState& t = p.threads.emplace_back();
    t.summary.tid = tid;
    t.summary.first_seen_ns = ts;
    return t;
  }

  // A ThreadStart names a new thread: it ends any exec alias of that tid,
  // and a tid reused after its thread exited gets a new entry.
  ThreadState& ThreadForStart(ProcessState& p, uint32_t tid, uint64_t ts) {
    if (tid != p.summary.pid) p.exec_aliases.erase(tid);
    auto it = p.by_tid.find(tid);
    if (it != p.by_tid.end()) {
      const ThreadState& old = p.threads[it->second];
      if (old.summary.exit_ns && ts > old.summary.exit_ns) p.by_tid.erase(it);
    }
    return Thread(p, tid, ts);
  }

  void OnExec(ProcessState& p, const v1::Event& event) {
    const v1::Exec& exec = event.exec();
    const uint32_t pid = event.pid();
    const uint64_t ts = event.ts_ns();
    p.summary.exec_filename = exec.filename();
    const uint32_t old_tid = exec.old_tid();
    if (old_tid != 0 && old_tid != pid) {
      auto old_it = p.by_tid.find(old_tid);
      if (old_it != p.by_tid.end()) {
        const size_t old_index = old_it->second;
        p.by_tid.erase(old_it);
        auto main_it = p.by_tid.find(pid);
        if (main_it == p.by_tid.end()) {
          // The old leader was never seen: the exec'ing thread simply takes
          // its tid, keeping its place in the list.
          p.threads[old_index].summary.tid = pid;
          p.by_tid[pid] = old_index;
        } else {
          MergeThread(p.threads[main_it->second], std::move(p.threads[old_index]));
          p.threads.erase(p.threads.begin() + old_index);
          for (auto& [tid, i] : p.by_tid) {
            if (i > old_index) --i;
          }
        }
      }
      p.exec_aliases.insert(old_tid);
    }
    ThreadState& main = Thread(p, pid, ts);
    main.comm.Offer(exec.comm(), ts);
    // The old leader's exit (in de_thread) is not the end of the main
    // thread: the exec'ing thread carries on under its tid.
    if (main.summary.exit_ns <= ts) main.summary.exit_ns = 0;
  }

  // Counts `event` and widens the trace's time span; false for the
  // tracer's own accounting, which is about no traced thread.
  bool Count(const v1::Event& event) {
    ++events;
    const uint64_t ts = event.ts_ns();
    // A zero timestamp means "not known", not the epoch of the trace.
    if (ts) {
      if (!first_ns || ts < first_ns) first_ns = ts;
      last_ns = std::max(last_ns, ts);
    }
    if (!event.has_tracer_stats()) return true;
    if (!has_tracer_stats || ts >= tracer_stats_ts) {
      tracer_stats = event.tracer_stats();
      tracer_stats_ts = ts;
      has_tracer_stats = true;
    }
    return false;
  }

  void OnProcessStart(const v1::Event& event, uint32_t tid) {
    const v1::ProcessStart& start = event.process_start();
    const uint64_t ts = event.ts_ns();
    ProcessState& p = ProcessForStart(event.pid(), ts);
    p.summary.ppid = start.ppid();
    p.summary.is_root = p.summary.is_root || start.is_root();
    p.start_comm.Offer(start.comm(), ts);
    ThreadState& t = ThreadForStart(p, tid, ts);
    t.comm.Offer(start.comm(), ts);
  }

  static void OnOffCpu(const v1::OffCpu& off, ThreadSummary& s) {
    if (off.voluntary()) {
      ++s.voluntary_switches;
    } else {
      ++s.involuntary_switches;
    }
    s.off_cpu_ns += off.duration_ns();
    s.runqueue_ns += off.runqueue_ns();
    const int cause = off.cause();
    s.off_cpu_by_cause_ns[cause >= 0 && cause < kCauseCount ? cause : 0] += off.duration_ns();
  }

  // The payloads that are about thread `t` of process `p`.
  void OnThreadEvent(ProcessState& p, ThreadState& t, const v1::Event& event, uint32_t tid) {
    const uint64_t ts = event.ts_ns();
    ThreadSummary& s = t.summary;
    switch (event.payload_case()) {
      case v1::Event::kCommChange: t.comm.Offer(event.comm_change().new_comm(), ts); break;
      case v1::Event::kThreadExit:
        t.comm.Offer(event.thread_exit().comm(), ts);
        s.exit_ns = ts;
        break;
      case v1::Event::kProcessExit: {
        const v1::ProcessExit& exit = event.process_exit();
        // Sent by the group's last thread: its comm is that thread's name.
        t.comm.Offer(exit.comm(), ts);
        p.start_comm.Offer(exit.comm(), ts);
        p.summary.exited = true;
        p.summary.wait_status = exit.wait_status();
        p.summary.exit_ns = ts;
        break;
      }
      case v1::Event::kOffCpu:
        OnOffCpu(event.off_cpu(), s);
        unseen_switch_ins += event.off_cpu().switch_in_unseen();
        unseen_switch_ins_ended_running += event.off_cpu().switch_in_unseen() && event.off_cpu().end_seen_running();
        unseen_switch_ins_ended_by_run_time +=
            event.off_cpu().switch_in_unseen() && event.off_cpu().end_from_run_time();
        break;
      case v1::Event::kPageFaults:
        s.page_faults += event.page_faults().count();
        s.major_page_faults += event.page_faults().major();
        break;
      case v1::Event::kMmap: AddCall(s.mmap, event.mmap().length(), event.mmap().duration_ns()); break;
      case v1::Event::kMunmap: AddCall(s.munmap, event.munmap().length(), event.munmap().duration_ns()); break;
      case v1::Event::kFutexWait: AddCall(s.futex_wait, 0, event.futex_wait().duration_ns()); break;
      case v1::Event::kBlockIo: AddBlockIo(s.block_io, event.block_io()); break;
      case v1::Event::kFutexWakes: {
        WakeSnapshot snap{ts, event.futex_wakes().calls(), event.futex_wakes().woken()};
        auto [it, inserted] = t.wakes.emplace(tid, snap);
        if (!inserted && ts >= it->second.ts_ns) it->second = snap;
        break;
      }
      case v1::Event::kSyscallStats: {
        const v1::SyscallStats& st = event.syscall_stats();
        SyscallSnapshot snap{ts, st.calls(), st.total_ns(), st.max_ns()};
        auto [it, inserted] = t.syscalls.emplace(std::make_pair(tid, st.nr()), snap);
        if (!inserted && ts >= it->second.ts_ns) it->second = snap;
        break;
      }
      default:
        // Payloads this summary does not use (e.g. the CUDA side's) still
        // count as events and make their thread visible.
        break;
    }
  }

  void Add(const v1::Event& event) {
    if (!Count(event)) return;
    if (event.has_block_io()) {
      AddBlockIo(block_io, event.block_io());
      // Issued for no thread the recorder knew: no thread to charge.
      if (event.pid() == 0) {
        AddBlockIo(block_io_unattributed, event.block_io());
        return;
      }
    }
    const uint32_t pid = event.pid();
    const uint32_t tid = event.tid() ? event.tid() : pid;
    const uint64_t ts = event.ts_ns();
    if (event.has_process_start()) {
      OnProcessStart(event, tid);
      return;
    }
    ProcessState& p = Process(pid, ts);
    if (event.has_thread_start()) {
      ThreadState& t = ThreadForStart(p, tid, ts);
      t.comm.Offer(event.thread_start().comm(), ts);
      return;
    }
    if (event.has_exec()) {
      OnExec(p, event);
      return;
    }
    OnThreadEvent(p, Thread(p, tid, ts), event, tid);
  }

  OsSummary Finish() const {
    OsSummary out;
    out.header = header;
    out.has_trailer = has_trailer;
    out.trailer = trailer;
    out.first_event_ns = first_ns;
    out.last_event_ns = last_ns;
    out.events = events;
    out.unseen_switch_ins = unseen_switch_ins;
    out.unseen_switch_ins_ended_running = unseen_switch_ins_ended_running;
    out.unseen_switch_ins_ended_by_run_time = unseen_switch_ins_ended_by_run_time;
    out.block_io = block_io;
    out.block_io_unattributed = block_io_unattributed;

    if (has_tracer_stats) {
      for (const auto& [kind, n] : tracer_stats.ring_buffer_drops()) {
        if (!n) continue;
        out.drops_by_reason[absl::StrCat("ringbuf:", kind)] += n;
        out.dropped_events += n;
      }
      for (const auto& [map, n] : tracer_stats.map_full_drops()) {
        if (!n) continue;
        out.drops_by_reason[absl::StrCat("map_full:", map)] += n;
        out.dropped_events += n;
      }
    }
    if (has_trailer) out.dropped_events = std::max(out.dropped_events, trailer.dropped_events());
    if (has_trailer && trailer.has_write_failure()) {
      for (const auto& [kind, n] : trailer.write_failure().lost_by_kind()) {
        out.drops_by_reason[absl::StrCat("write_failed:", kind)] += n;
      }
      out.dropped_events += trailer.write_failure().lost_events();
    }
    out.incomplete_reason = IncompleteReason(header, has_trailer, trailer);

    std::map<int32_t, SyscallRow> by_nr;
    for (const ProcessState& p : processes) {
      ProcessSummary ps = p.summary;
      const ThreadState* main = nullptr;
      for (const ThreadState& t : p.threads) {
        ThreadSummary ts = t.summary;
        ts.comm = t.comm.name;
        for (const auto& [key, snap] : t.syscalls) {
          ts.syscalls.calls += snap.calls;
          ts.syscalls.total_ns += snap.total_ns;
          ts.syscalls.max_ns = std::max(ts.syscalls.max_ns, snap.max_ns);
          SyscallRow& row = by_nr[key.second];
          row.nr = key.second;
          row.calls += snap.calls;
          row.total_ns += snap.total_ns;
          row.max_ns = std::max(row.max_ns, snap.max_ns);
        }
        for (const auto& [key, snap] : t.wakes) {
          ts.futex_wake_calls += snap.calls;
          ts.futex_woken += snap.woken;
        }
        // Every thread ends with its process.
        if (ps.exited && !ts.exit_ns) ts.exit_ns = ps.exit_ns;
        if (t.summary.tid == p.summary.pid) main = &t;
        ps.threads.push_back(std::move(ts));
      }
      ps.comm = main && main->comm.set ? main->comm.name : p.start_comm.name;
      out.processes.push_back(std::move(ps));
    }

    for (auto& [nr, row] : by_nr) {
      auto name = header.syscall_names().find(nr);
      row.name = name != header.syscall_names().end() && !name->second.empty()
                     ? name->second
                     : absl::StrCat("syscall_", nr);
      out.syscalls.push_back(std::move(row));
    }
    std::stable_sort(out.syscalls.begin(), out.syscalls.end(),
                     [](const SyscallRow& a, const SyscallRow& b) {
                       return std::tie(b.total_ns, b.calls) < std::tie(a.total_ns, a.calls);
                     });
    return out;
  }
};

OsSummaryBuilder::OsSummaryBuilder(const v1::TraceHeader& header)
    : impl_(std::make_shared<Impl>()) {
  impl_->header = header;
}

void OsSummaryBuilder::Add(const v1::Event& event) {
  impl_->Add(event);
}

void OsSummaryBuilder::SetTrailer(const v1::TraceTrailer& trailer) {
  impl_->has_trailer = true;
  impl_->trailer = trailer;
}

OsSummary OsSummaryBuilder::Finish() {
  return impl_->Finish();
}

absl::StatusOr<OsSummary> SummarizeTraceFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  OsSummaryBuilder builder((*reader)->header());
  const absl::Status status = ForEachEvent(
      **reader, [&](const v1::Event& event) { builder.Add(event); },
      [&](const v1::TraceTrailer& trailer) { builder.SetTrailer(trailer); });
  OsSummary summary = builder.Finish();
  if (!status.ok()) summary.read_error = std::string(status.message());
  return summary;
}

}  // namespace gpuos
