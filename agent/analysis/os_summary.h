// Per-process, per-thread and per-syscall totals of a trace's OS events:
// what `gpuos-trace report` prints.  Built in one streaming pass, in memory
// proportional to the number of threads, not of events.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

struct CallTotals {
  uint64_t calls = 0;
  uint64_t bytes = 0;     // mmap/munmap only
  uint64_t total_ns = 0;
  uint64_t max_ns = 0;
};

// Block I/O requests a thread issued (BlockIo events): total_ns adds each
// request's issue-to-completion time, so overlapping requests add up.
struct BlockIoTotals {
  uint64_t requests = 0;
  uint64_t bytes = 0;
  uint64_t total_ns = 0;
};

struct ThreadSummary {
  uint32_t tid = 0;
  std::string comm;  // the last name seen
  uint64_t first_seen_ns = 0;
  uint64_t exit_ns = 0;  // 0 while alive at the end
  uint64_t voluntary_switches = 0;
  uint64_t involuntary_switches = 0;
  uint64_t off_cpu_ns = 0;
  uint64_t runqueue_ns = 0;
  // Off-CPU time by cause (index: v1::OffCpuCause).
  uint64_t off_cpu_by_cause_ns[5] = {};
  uint64_t page_faults = 0;
  uint64_t major_page_faults = 0;
  CallTotals mmap;
  CallTotals munmap;
  CallTotals futex_wait;
  uint64_t futex_wake_calls = 0;
  uint64_t futex_woken = 0;
  CallTotals syscalls;  // all syscalls of this thread
  BlockIoTotals block_io;
};

struct ProcessSummary {
  uint32_t pid = 0;
  uint32_t ppid = 0;
  std::string comm;
  std::string exec_filename;  // the last successful execve, if any
  bool is_root = false;
  bool exited = false;
  int32_t wait_status = 0;
  uint64_t start_ns = 0;
  uint64_t exit_ns = 0;
  std::vector<ThreadSummary> threads;  // ordered by first appearance
};

struct SyscallRow {
  int32_t nr = 0;
  std::string name;  // from the trace header; "syscall_<nr>" if unknown
  uint64_t calls = 0;
  uint64_t total_ns = 0;
  uint64_t max_ns = 0;
};

struct OsSummary {
  v1::TraceHeader header;
  bool has_trailer = false;
  v1::TraceTrailer trailer;
  uint64_t first_event_ns = 0;
  uint64_t last_event_ns = 0;
  uint64_t events = 0;
  // Events the kernel side could not record (ring buffer full or a map full).
  uint64_t dropped_events = 0;
  std::map<std::string, uint64_t> drops_by_reason;
  // Off-CPU intervals whose switch-in the kernel did not trace (OffCpu's
  // switch_in_unseen), all counted; of them, those whose time runs to the
  // thread's next syscall (end_seen_running: an upper bound), those ended
  // by its run time at its next switch-out (end_from_run_time), and the
  // rest (traces from before that) only to the wakeup (a lower bound).
  uint64_t unseen_switch_ins = 0;
  uint64_t unseen_switch_ins_ended_running = 0;
  uint64_t unseen_switch_ins_ended_by_run_time = 0;
  // Empty when the trace holds everything the recording saw; else why not
  // (stream/trace_completeness.h).  Events lost writing the file are in
  // dropped_events and drops_by_reason ("write_failed:<kind>") too.
  std::string incomplete_reason;
  std::vector<ProcessSummary> processes;  // ordered by first appearance
  std::vector<SyscallRow> syscalls;       // ranked by total_ns, descending
  // Every block I/O request of the traced tree, and those no traced thread
  // is known to have issued (pid 0: the kernel issued them later, from a
  // plug or a worker, for a thread it did not record).
  BlockIoTotals block_io;
  BlockIoTotals block_io_unattributed;
  // Set when the file was damaged: what was read is summarized, and this
  // says where reading stopped.
  std::string read_error;
};

// Consumes events in file order.
class OsSummaryBuilder {
 public:
  explicit OsSummaryBuilder(const v1::TraceHeader& header);
  void Add(const v1::Event& event);
  void SetTrailer(const v1::TraceTrailer& trailer);
  OsSummary Finish();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Reads `path` and summarizes it.  A damaged file still gives a summary of
// what was readable, with read_error set; only a file that cannot be opened
// or has no valid header is an error.
absl::StatusOr<OsSummary> SummarizeTraceFile(const std::string& path);

}  // namespace gpuos
