// OsSummaryBuilder and SummarizeTraceFile: hand-built event streams whose
// totals are known exactly, a randomized stream checked against a naive
// model, and real .gpuos files written by TraceWriter (whole and truncated).
#include "analysis/os_summary.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

v1::Event Ev(uint64_t ts, uint32_t pid, uint32_t tid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  return e;
}

v1::Event ProcessStart(uint64_t ts, uint32_t pid, uint32_t ppid, const std::string& comm,
                       bool is_root = false) {
  v1::Event e = Ev(ts, pid, pid);
  e.mutable_process_start()->set_ppid(ppid);
  e.mutable_process_start()->set_parent_tid(ppid);
  e.mutable_process_start()->set_comm(comm);
  e.mutable_process_start()->set_is_root(is_root);
  return e;
}

v1::Event ThreadStart(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_thread_start()->set_creator_tid(pid);
  e.mutable_thread_start()->set_comm(comm);
  return e;
}

v1::Event Exec(uint64_t ts, uint32_t pid, uint32_t old_tid, const std::string& filename,
               const std::string& comm) {
  v1::Event e = Ev(ts, pid, pid);
  e.mutable_exec()->set_filename(filename);
  e.mutable_exec()->set_comm(comm);
  e.mutable_exec()->set_old_tid(old_tid);
  return e;
}

v1::Event Rename(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& old_comm,
                 const std::string& new_comm) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_comm_change()->set_old_comm(old_comm);
  e.mutable_comm_change()->set_new_comm(new_comm);
  return e;
}

v1::Event ThreadExit(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_thread_exit()->set_comm(comm);
  return e;
}

v1::Event ProcessExit(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm,
                      int32_t wait_status) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_process_exit()->set_comm(comm);
  e.mutable_process_exit()->set_wait_status(wait_status);
  return e;
}

v1::Event OffCpu(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t duration, uint64_t runqueue,
                 v1::OffCpuCause cause, bool voluntary) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_off_cpu()->set_duration_ns(duration);
  e.mutable_off_cpu()->set_runqueue_ns(runqueue);
  e.mutable_off_cpu()->set_cause(cause);
  e.mutable_off_cpu()->set_voluntary(voluntary);
  e.mutable_off_cpu()->set_syscall_nr(-1);
  return e;
}

v1::Event Faults(uint64_t ts, uint32_t pid, uint32_t tid, uint32_t count, uint32_t major) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_page_faults()->set_last_ns(ts + 10);
  e.mutable_page_faults()->set_count(count);
  e.mutable_page_faults()->set_major(major);
  return e;
}

v1::Event Mmap(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t duration, uint64_t length) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_mmap()->set_duration_ns(duration);
  e.mutable_mmap()->set_length(length);
  e.mutable_mmap()->set_result(0x7f0000000000);
  return e;
}

v1::Event Munmap(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t duration, uint64_t length) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_munmap()->set_duration_ns(duration);
  e.mutable_munmap()->set_length(length);
  return e;
}

v1::Event FutexWait(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t duration) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_futex_wait()->set_duration_ns(duration);
  return e;
}

v1::Event Wakes(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t calls, uint64_t woken) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_futex_wakes()->set_calls(calls);
  e.mutable_futex_wakes()->set_woken(woken);
  return e;
}

v1::Event Syscalls(uint64_t ts, uint32_t pid, uint32_t tid, int32_t nr, uint64_t calls,
                   uint64_t total, uint64_t max) {
  v1::Event e = Ev(ts, pid, tid);
  e.mutable_syscall_stats()->set_nr(nr);
  e.mutable_syscall_stats()->set_calls(calls);
  e.mutable_syscall_stats()->set_total_ns(total);
  e.mutable_syscall_stats()->set_max_ns(max);
  return e;
}

v1::Event TracerStats(uint64_t ts, const std::map<std::string, uint64_t>& ringbuf,
                      const std::map<std::string, uint64_t>& map_full) {
  v1::Event e = Ev(ts, 9999, 9999);  // the tracer's own pid: never a traced process
  for (const auto& [k, v] : ringbuf)
    (*e.mutable_tracer_stats()->mutable_ring_buffer_drops())[k] = v;
  for (const auto& [k, v] : map_full) (*e.mutable_tracer_stats()->mutable_map_full_drops())[k] = v;
  return e;
}

v1::TraceHeader Header() {
  v1::TraceHeader h;
  h.set_hostname("node1");
  h.set_kernel_release("6.18.0-test");
  h.set_root_pid(100);
  h.add_command_line("python3");
  h.add_command_line("train.py");
  (*h.mutable_syscall_names())[0] = "read";
  (*h.mutable_syscall_names())[1] = "write";
  (*h.mutable_syscall_names())[202] = "futex";
  return h;
}

// A small training job: a root process that execs, a renamed worker
// thread, a forked child that exits early, a process only seen mid-stream,
// cumulative snapshots that must replace each other, and drops.
std::vector<v1::Event> TrainingJobEvents() {
  using C = v1::OffCpuCause;
  return {
      ProcessStart(1000, 100, 50, "bash", /*is_root=*/true),
      Exec(1100, 100, 100, "/usr/bin/python3", "python3"),
      ThreadStart(1200, 100, 101, "python3"),
      Rename(1300, 100, 101, "python3", "pt_dataloader"),
      OffCpu(1400, 100, 100, 500, 50, C::OFF_CPU_CAUSE_FUTEX, true),
      OffCpu(1500, 100, 100, 300, 300, C::OFF_CPU_CAUSE_PREEMPTED, false),
      OffCpu(1600, 100, 101, 1000, 10, C::OFF_CPU_CAUSE_SYSCALL, true),
      Faults(1700, 100, 100, 10, 2),
      Faults(1800, 100, 100, 5, 0),
      Mmap(1900, 100, 101, 40, 4096),
      Mmap(2000, 100, 101, 60, 8192),
      TracerStats(2000, {{"off_cpu", 1}}, {}),
      Munmap(2050, 100, 101, 25, 4096),
      FutexWait(2100, 100, 100, 700),
      FutexWait(2200, 100, 100, 100),
      Wakes(2300, 100, 101, 3, 2),
      Wakes(2400, 100, 101, 5, 4),
      Syscalls(2500, 100, 100, 0, 10, 1000, 300),
      Syscalls(2600, 100, 101, 0, 4, 400, 200),
      Syscalls(2600, 100, 101, 202, 7, 7000, 2000),
      Syscalls(2700, 100, 100, 999, 1, 50, 50),
      ProcessStart(2800, 200, 100, "python3"),
      ThreadExit(2900, 200, 200, "python3"),
      ProcessExit(2900, 200, 200, "python3", 1 << 8),
      Syscalls(3000, 100, 100, 0, 12, 1500, 500),  // replaces the one at 2500
      OffCpu(3100, 300, 301, 100, 100, C::OFF_CPU_CAUSE_PREEMPTED, false),
      TracerStats(3200, {{"off_cpu", 5}, {"mmap", 0}}, {{"sched_state", 2}}),
  };
}

OsSummary Summarize(const std::vector<v1::Event>& events,
                    const v1::TraceHeader& header = Header()) {
  OsSummaryBuilder builder(header);
  for (const v1::Event& e : events) builder.Add(e);
  return builder.Finish();
}

// An interval whose switch-in the kernel did not trace still counts as a
// switch and its time, and the summary counts such intervals (the report
// says so: os_report_test).
TEST(OsSummaryTest, UnseenSwitchInsAreCounted) {
  std::vector<v1::Event> events = TrainingJobEvents();
  EXPECT_EQ(Summarize(events).unseen_switch_ins, 0u);
  v1::Event unseen = OffCpu(3150, 100, 100, 3000, 0, v1::OFF_CPU_CAUSE_SYSCALL, true);
  unseen.mutable_off_cpu()->set_switch_in_unseen(true);
  events.push_back(unseen);
  v1::Event ended_running = OffCpu(3400, 100, 100, 200, 0, v1::OFF_CPU_CAUSE_SYSCALL, true);
  ended_running.mutable_off_cpu()->set_switch_in_unseen(true);
  ended_running.mutable_off_cpu()->set_end_seen_running(true);
  events.push_back(ended_running);
  v1::Event ended_by_run_time = OffCpu(3600, 100, 100, 50, 0, v1::OFF_CPU_CAUSE_SYSCALL, true);
  ended_by_run_time.mutable_off_cpu()->set_switch_in_unseen(true);
  ended_by_run_time.mutable_off_cpu()->set_end_from_run_time(true);
  events.push_back(ended_by_run_time);
  const OsSummary s = Summarize(events);
  EXPECT_EQ(s.unseen_switch_ins, 3u);
  EXPECT_EQ(s.unseen_switch_ins_ended_running, 1u);
  EXPECT_EQ(s.unseen_switch_ins_ended_by_run_time, 1u);
  const ThreadSummary* main = nullptr;
  for (const ProcessSummary& p : s.processes) {
    for (const ThreadSummary& t : p.threads) {
      if (t.tid == 100) main = &t;
    }
  }
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->voluntary_switches, 4u);
  EXPECT_EQ(main->off_cpu_ns, 4050u);
}

TEST(OsSummaryTest, TrainingJobTotals) {
  const std::vector<v1::Event> events = TrainingJobEvents();
  const OsSummary s = Summarize(events);

  EXPECT_EQ(s.events, events.size());
  EXPECT_EQ(s.first_event_ns, 1000u);
  EXPECT_EQ(s.last_event_ns, 3200u);
  EXPECT_EQ(s.header.hostname(), "node1");
  EXPECT_FALSE(s.has_trailer);
  EXPECT_TRUE(s.read_error.empty());

  // The last TracerStats counts, not their sum; zero counts are no reason.
  EXPECT_EQ(s.dropped_events, 7u);
  const std::map<std::string, uint64_t> drops = {{"ringbuf:off_cpu", 5},
                                                 {"map_full:sched_state", 2}};
  EXPECT_EQ(s.drops_by_reason, drops);

  // The tracer's own pid (TracerStats) is no process of the trace.
  ASSERT_EQ(s.processes.size(), 3u);
  EXPECT_EQ(s.processes[0].pid, 100u);
  EXPECT_EQ(s.processes[1].pid, 200u);
  EXPECT_EQ(s.processes[2].pid, 300u);

  const ProcessSummary& root = s.processes[0];
  EXPECT_EQ(root.ppid, 50u);
  EXPECT_EQ(root.comm, "python3");
  EXPECT_EQ(root.exec_filename, "/usr/bin/python3");
  EXPECT_TRUE(root.is_root);
  EXPECT_FALSE(root.exited);
  EXPECT_EQ(root.start_ns, 1000u);
  ASSERT_EQ(root.threads.size(), 2u);

  const ThreadSummary& main = root.threads[0];
  EXPECT_EQ(main.tid, 100u);
  EXPECT_EQ(main.comm, "python3");
  EXPECT_EQ(main.first_seen_ns, 1000u);
  EXPECT_EQ(main.exit_ns, 0u);
  EXPECT_EQ(main.voluntary_switches, 1u);
  EXPECT_EQ(main.involuntary_switches, 1u);
  EXPECT_EQ(main.off_cpu_ns, 800u);
  EXPECT_EQ(main.runqueue_ns, 350u);
  EXPECT_EQ(main.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_FUTEX], 500u);
  EXPECT_EQ(main.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_PREEMPTED], 300u);
  EXPECT_EQ(main.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_SYSCALL], 0u);
  EXPECT_EQ(main.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_UNKNOWN], 0u);
  EXPECT_EQ(main.page_faults, 15u);
  EXPECT_EQ(main.major_page_faults, 2u);
  EXPECT_EQ(main.mmap.calls, 0u);
  EXPECT_EQ(main.futex_wait.calls, 2u);
  EXPECT_EQ(main.futex_wait.total_ns, 800u);
  EXPECT_EQ(main.futex_wait.max_ns, 700u);
  EXPECT_EQ(main.futex_wake_calls, 0u);
  // Latest nr 0 snapshot (12, 1500, 500) + nr 999 (1, 50, 50).
  EXPECT_EQ(main.syscalls.calls, 13u);
  EXPECT_EQ(main.syscalls.total_ns, 1550u);
  EXPECT_EQ(main.syscalls.max_ns, 500u);

  const ThreadSummary& worker = root.threads[1];
  EXPECT_EQ(worker.tid, 101u);
  EXPECT_EQ(worker.comm, "pt_dataloader");
  EXPECT_EQ(worker.first_seen_ns, 1200u);
  EXPECT_EQ(worker.voluntary_switches, 1u);
  EXPECT_EQ(worker.involuntary_switches, 0u);
  EXPECT_EQ(worker.off_cpu_ns, 1000u);
  EXPECT_EQ(worker.runqueue_ns, 10u);
  EXPECT_EQ(worker.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_SYSCALL], 1000u);
  EXPECT_EQ(worker.page_faults, 0u);
  EXPECT_EQ(worker.mmap.calls, 2u);
  EXPECT_EQ(worker.mmap.bytes, 12288u);
  EXPECT_EQ(worker.mmap.total_ns, 100u);
  EXPECT_EQ(worker.mmap.max_ns, 60u);
  EXPECT_EQ(worker.munmap.calls, 1u);
  EXPECT_EQ(worker.munmap.bytes, 4096u);
  EXPECT_EQ(worker.munmap.total_ns, 25u);
  EXPECT_EQ(worker.munmap.max_ns, 25u);
  EXPECT_EQ(worker.futex_wait.calls, 0u);
  EXPECT_EQ(worker.futex_wake_calls, 5u);  // the later snapshot, not 3 + 5
  EXPECT_EQ(worker.futex_woken, 4u);
  EXPECT_EQ(worker.syscalls.calls, 11u);
  EXPECT_EQ(worker.syscalls.total_ns, 7400u);
  EXPECT_EQ(worker.syscalls.max_ns, 2000u);

  const ProcessSummary& child = s.processes[1];
  EXPECT_EQ(child.ppid, 100u);
  EXPECT_EQ(child.comm, "python3");
  EXPECT_FALSE(child.is_root);
  EXPECT_TRUE(child.exited);
  EXPECT_EQ(child.wait_status, 1 << 8);
  EXPECT_EQ(child.start_ns, 2800u);
  EXPECT_EQ(child.exit_ns, 2900u);
  ASSERT_EQ(child.threads.size(), 1u);
  EXPECT_EQ(child.threads[0].tid, 200u);
  EXPECT_EQ(child.threads[0].exit_ns, 2900u);

  // Seen only through an off-CPU record of a non-main thread.
  const ProcessSummary& late = s.processes[2];
  EXPECT_EQ(late.ppid, 0u);
  EXPECT_EQ(late.comm, "");
  EXPECT_FALSE(late.exited);
  ASSERT_EQ(late.threads.size(), 1u);
  EXPECT_EQ(late.threads[0].tid, 301u);
  EXPECT_EQ(late.threads[0].involuntary_switches, 1u);
  EXPECT_EQ(late.threads[0].first_seen_ns, 3100u);

  // futex: 7000 ns; read: 1500 + 400 ns over 16 calls; nr 999 has no name.
  ASSERT_EQ(s.syscalls.size(), 3u);
  EXPECT_EQ(s.syscalls[0].name, "futex");
  EXPECT_EQ(s.syscalls[0].nr, 202);
  EXPECT_EQ(s.syscalls[0].calls, 7u);
  EXPECT_EQ(s.syscalls[0].total_ns, 7000u);
  EXPECT_EQ(s.syscalls[0].max_ns, 2000u);
  EXPECT_EQ(s.syscalls[1].name, "read");
  EXPECT_EQ(s.syscalls[1].calls, 16u);
  EXPECT_EQ(s.syscalls[1].total_ns, 1900u);
  EXPECT_EQ(s.syscalls[1].max_ns, 500u);
  EXPECT_EQ(s.syscalls[2].name, "syscall_999");
  EXPECT_EQ(s.syscalls[2].calls, 1u);
}

TEST(OsSummaryTest, TrailerDropsCountWhenLarger) {
  OsSummaryBuilder builder(Header());
  for (const v1::Event& e : TrainingJobEvents()) builder.Add(e);
  v1::TraceTrailer trailer;
  trailer.set_dropped_events(100);
  trailer.set_events_written(27);
  trailer.mutable_end_clock()->set_monotonic_ns(5000);
  builder.SetTrailer(trailer);
  OsSummary s = builder.Finish();
  EXPECT_TRUE(s.has_trailer);
  EXPECT_EQ(s.trailer.end_clock().monotonic_ns(), 5000u);
  EXPECT_EQ(s.dropped_events, 100u);
  EXPECT_EQ(s.drops_by_reason.size(), 2u);

  // A trailer that counts fewer drops than the stats does not lower them.
  trailer.set_dropped_events(3);
  builder.SetTrailer(trailer);
  s = builder.Finish();
  EXPECT_EQ(s.dropped_events, 7u);
}

TEST(OsSummaryTest, ExecByNonLeaderThreadMergesIntoMainThread) {
  using C = v1::OffCpuCause;
  const OsSummary s = Summarize({
      ProcessStart(100, 400, 1, "launcher"),
      ThreadStart(110, 400, 401, "launcher"),
      OffCpu(120, 400, 400, 10, 1, C::OFF_CPU_CAUSE_FUTEX, true),
      OffCpu(130, 400, 401, 20, 2, C::OFF_CPU_CAUSE_SYSCALL, true),
      Syscalls(140, 400, 401, 0, 3, 30, 15),
      Syscalls(140, 400, 400, 0, 2, 20, 12),
      Mmap(145, 400, 401, 9, 100),
      ThreadExit(150, 400, 400, "launcher"),  // de_thread kills the old leader
      Exec(160, 400, 401, "/bin/true", "true"),
      // Reported late: from before the exec, by the thread that exec'ed.
      OffCpu(155, 400, 401, 5, 0, C::OFF_CPU_CAUSE_PREEMPTED, false),
      OffCpu(170, 400, 400, 40, 4, C::OFF_CPU_CAUSE_SYSCALL, true),
      // The kernel's (tid 400, read) entry carries the old leader's 2 calls on.
      Syscalls(180, 400, 400, 0, 5, 50, 20),
      // tid 401 reused by a new thread after the exec.
      ThreadStart(190, 400, 401, "worker"),
      OffCpu(195, 400, 401, 7, 0, C::OFF_CPU_CAUSE_FUTEX, true),
      ProcessExit(200, 400, 400, "true", 0),
  });
  ASSERT_EQ(s.processes.size(), 1u);
  const ProcessSummary& p = s.processes[0];
  EXPECT_EQ(p.comm, "true");
  EXPECT_EQ(p.exec_filename, "/bin/true");
  EXPECT_TRUE(p.exited);
  EXPECT_EQ(p.exit_ns, 200u);
  ASSERT_EQ(p.threads.size(), 2u);

  const ThreadSummary& main = p.threads[0];
  EXPECT_EQ(main.tid, 400u);
  EXPECT_EQ(main.comm, "true");
  EXPECT_EQ(main.first_seen_ns, 100u);
  EXPECT_EQ(main.exit_ns, 200u);  // not the old leader's 150
  EXPECT_EQ(main.voluntary_switches, 3u);
  EXPECT_EQ(main.involuntary_switches, 1u);
  EXPECT_EQ(main.off_cpu_ns, 75u);
  EXPECT_EQ(main.runqueue_ns, 7u);
  EXPECT_EQ(main.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_SYSCALL], 60u);
  EXPECT_EQ(main.mmap.calls, 1u);
  EXPECT_EQ(main.mmap.bytes, 100u);
  // (400, read): 5 calls / 50 ns; (401, read) frozen at 3 calls / 30 ns.
  EXPECT_EQ(main.syscalls.calls, 8u);
  EXPECT_EQ(main.syscalls.total_ns, 80u);
  EXPECT_EQ(main.syscalls.max_ns, 20u);

  const ThreadSummary& reused = p.threads[1];
  EXPECT_EQ(reused.tid, 401u);
  EXPECT_EQ(reused.comm, "worker");
  EXPECT_EQ(reused.first_seen_ns, 190u);
  EXPECT_EQ(reused.off_cpu_ns, 7u);
  EXPECT_EQ(reused.exit_ns, 200u);

  ASSERT_EQ(s.syscalls.size(), 1u);
  EXPECT_EQ(s.syscalls[0].calls, 8u);
  EXPECT_EQ(s.syscalls[0].total_ns, 80u);
}

TEST(OsSummaryTest, ExecWhoseOldLeaderWasNeverSeen) {
  // Attached mid-run: only the exec'ing thread was known.
  const OsSummary s = Summarize({
      ThreadStart(10, 500, 501, "runner"),
      Faults(20, 500, 501, 4, 1),
      Exec(30, 500, 501, "/usr/bin/env", "env"),
      Faults(40, 500, 500, 6, 0),
  });
  ASSERT_EQ(s.processes.size(), 1u);
  ASSERT_EQ(s.processes[0].threads.size(), 1u);
  const ThreadSummary& t = s.processes[0].threads[0];
  EXPECT_EQ(t.tid, 500u);
  EXPECT_EQ(t.comm, "env");
  EXPECT_EQ(t.page_faults, 10u);
  EXPECT_EQ(t.major_page_faults, 1u);
  EXPECT_EQ(t.first_seen_ns, 10u);
  EXPECT_EQ(s.processes[0].comm, "env");
}

TEST(OsSummaryTest, LatestNameAndSnapshotWinByTimestamp) {
  const OsSummary s = Summarize({
      ProcessStart(100, 600, 1, "a"),
      Rename(300, 600, 600, "a", "c"),
      Rename(200, 600, 600, "a", "b"),  // older, arrives late
      Syscalls(500, 600, 600, 1, 10, 100, 20),
      Syscalls(400, 600, 600, 1, 8, 80, 20),  // older, arrives late
      Wakes(500, 600, 600, 6, 6),
      Wakes(450, 600, 600, 2, 2),
  });
  const ThreadSummary& t = s.processes[0].threads[0];
  EXPECT_EQ(t.comm, "c");
  EXPECT_EQ(s.processes[0].comm, "c");
  EXPECT_EQ(t.syscalls.calls, 10u);
  EXPECT_EQ(t.syscalls.total_ns, 100u);
  EXPECT_EQ(t.futex_wake_calls, 6u);
  ASSERT_EQ(s.syscalls.size(), 1u);
  EXPECT_EQ(s.syscalls[0].name, "write");
  EXPECT_EQ(s.syscalls[0].calls, 10u);
}

TEST(OsSummaryTest, ReusedPidAfterExitIsANewProcess) {
  using C = v1::OffCpuCause;
  const OsSummary s = Summarize({
      ProcessStart(100, 700, 1, "first"),
      OffCpu(110, 700, 700, 10, 0, C::OFF_CPU_CAUSE_UNKNOWN, true),
      ThreadExit(150, 700, 700, "first"),
      ProcessExit(150, 700, 700, "first", 9),  // killed by SIGKILL
      ProcessStart(200, 700, 1, "second"),
      OffCpu(210, 700, 700, 20, 0, C::OFF_CPU_CAUSE_UNKNOWN, true),
  });
  ASSERT_EQ(s.processes.size(), 2u);
  EXPECT_EQ(s.processes[0].comm, "first");
  EXPECT_TRUE(s.processes[0].exited);
  EXPECT_EQ(s.processes[0].wait_status, 9);
  EXPECT_EQ(s.processes[0].threads[0].off_cpu_ns, 10u);
  EXPECT_EQ(s.processes[0].threads[0].off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_UNKNOWN], 10u);
  EXPECT_EQ(s.processes[1].comm, "second");
  EXPECT_FALSE(s.processes[1].exited);
  EXPECT_EQ(s.processes[1].threads[0].off_cpu_ns, 20u);
  EXPECT_EQ(s.processes[1].start_ns, 200u);
}

TEST(OsSummaryTest, EmptyStream) {
  const OsSummary s = Summarize({});
  EXPECT_EQ(s.events, 0u);
  EXPECT_EQ(s.dropped_events, 0u);
  EXPECT_TRUE(s.processes.empty());
  EXPECT_TRUE(s.syscalls.empty());
}

// Random events over a few processes and threads, checked against totals
// kept the simplest possible way.
TEST(OsSummaryTest, RandomStreamMatchesNaiveTotals) {
  std::mt19937_64 rng(12345);
  struct Expect {
    uint64_t vol = 0, invol = 0, off = 0, rq = 0, faults = 0, major = 0;
    uint64_t mmap_calls = 0, mmap_bytes = 0, mmap_ns = 0, munmap_calls = 0, futex_calls = 0,
             futex_ns = 0;
    std::map<int32_t, std::pair<uint64_t, uint64_t>> latest;  // nr -> (calls, total)
  };
  std::map<std::pair<uint32_t, uint32_t>, Expect> expect;
  std::vector<v1::Event> events;
  uint64_t ts = 1;
  for (int i = 0; i < 20000; ++i) {
    const uint32_t pid = 1000 + static_cast<uint32_t>(rng() % 4) * 100;
    const uint32_t tid = pid + static_cast<uint32_t>(rng() % 5);
    Expect& e = expect[{pid, tid}];
    ts += 1 + rng() % 100;
    const uint64_t d = rng() % 100000;
    switch (rng() % 6) {
      case 0: {
        const bool vol = rng() % 2;
        const uint64_t rq = rng() % (d + 1);
        events.push_back(OffCpu(ts, pid, tid, d, rq, v1::OFF_CPU_CAUSE_FUTEX, vol));
        (vol ? e.vol : e.invol)++;
        e.off += d;
        e.rq += rq;
        break;
      }
      case 1: {
        const uint32_t count = rng() % 50, major = rng() % 3;
        events.push_back(Faults(ts, pid, tid, count, major));
        e.faults += count;
        e.major += major;
        break;
      }
      case 2:
        events.push_back(Mmap(ts, pid, tid, d, d * 4096));
        e.mmap_calls++;
        e.mmap_bytes += d * 4096;
        e.mmap_ns += d;
        break;
      case 3:
        events.push_back(Munmap(ts, pid, tid, d, 4096));
        e.munmap_calls++;
        break;
      case 4:
        events.push_back(FutexWait(ts, pid, tid, d));
        e.futex_calls++;
        e.futex_ns += d;
        break;
      case 5: {
        const int32_t nr = static_cast<int32_t>(rng() % 3);
        auto& [calls, total] = e.latest[nr];
        calls += 1 + rng() % 10;
        total += d;
        events.push_back(Syscalls(ts, pid, tid, nr, calls, total, d));
        break;
      }
    }
  }
  const OsSummary s = Summarize(events);
  EXPECT_EQ(s.events, events.size());
  size_t threads = 0;
  for (const ProcessSummary& p : s.processes) {
    for (const ThreadSummary& t : p.threads) {
      ++threads;
      SCOPED_TRACE(testing::Message() << "pid " << p.pid << " tid " << t.tid);
      const Expect& e = expect.at({p.pid, t.tid});
      EXPECT_EQ(t.voluntary_switches, e.vol);
      EXPECT_EQ(t.involuntary_switches, e.invol);
      EXPECT_EQ(t.off_cpu_ns, e.off);
      EXPECT_EQ(t.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_FUTEX], e.off);
      EXPECT_EQ(t.runqueue_ns, e.rq);
      EXPECT_EQ(t.page_faults, e.faults);
      EXPECT_EQ(t.major_page_faults, e.major);
      EXPECT_EQ(t.mmap.calls, e.mmap_calls);
      EXPECT_EQ(t.mmap.bytes, e.mmap_bytes);
      EXPECT_EQ(t.mmap.total_ns, e.mmap_ns);
      EXPECT_EQ(t.munmap.calls, e.munmap_calls);
      EXPECT_EQ(t.futex_wait.calls, e.futex_calls);
      EXPECT_EQ(t.futex_wait.total_ns, e.futex_ns);
      uint64_t calls = 0, total = 0;
      for (const auto& [nr, latest] : e.latest) {
        calls += latest.first;
        total += latest.second;
      }
      EXPECT_EQ(t.syscalls.calls, calls);
      EXPECT_EQ(t.syscalls.total_ns, total);
    }
  }
  EXPECT_EQ(threads, expect.size());
  uint64_t ranked_total = 0;
  for (size_t i = 0; i < s.syscalls.size(); ++i) {
    ranked_total += s.syscalls[i].total_ns;
    if (i) {
      EXPECT_GE(s.syscalls[i - 1].total_ns, s.syscalls[i].total_ns);
    }
  }
  uint64_t thread_total = 0;
  for (const auto& [key, e] : expect) {
    for (const auto& [nr, latest] : e.latest) thread_total += latest.second;
  }
  EXPECT_EQ(ranked_total, thread_total);
}

// --- Files ---------------------------------------------------------------

class TraceFileTest : public testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/os_summary_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/trace.gpuos";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  // Writes the training job with two events per batch, then a trailer.
  // Returns the file size after each batch record (the header's end first).
  std::vector<uint64_t> WriteTrace(const std::vector<v1::Event>& events) {
    TraceWriter::Options options;
    options.max_batch_events = 2;
    auto writer = TraceWriter::Create(path_, options);
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!writer.ok()) return {};
    EXPECT_TRUE((*writer)->WriteHeader(Header()).ok());
    std::vector<uint64_t> ends = {(*writer)->bytes_written()};
    for (const v1::Event& e : events) {
      EXPECT_TRUE((*writer)->Append(e).ok());
      if ((*writer)->bytes_written() != ends.back()) ends.push_back((*writer)->bytes_written());
    }
    EXPECT_TRUE((*writer)->Flush().ok());
    if ((*writer)->bytes_written() != ends.back()) ends.push_back((*writer)->bytes_written());
    v1::TraceTrailer trailer;
    trailer.set_events_written(events.size());
    trailer.set_dropped_events(7);
    trailer.mutable_end_clock()->set_monotonic_ns(4000);
    EXPECT_TRUE((*writer)->WriteTrailer(trailer).ok());
    EXPECT_TRUE((*writer)->Close().ok());
    return ends;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(TraceFileTest, WholeFileGivesTheSameSummaryAsTheEvents) {
  const std::vector<v1::Event> events = TrainingJobEvents();
  WriteTrace(events);
  absl::StatusOr<OsSummary> s = SummarizeTraceFile(path_);
  ASSERT_TRUE(s.ok()) << s.status();
  const OsSummary direct = Summarize(events);
  EXPECT_TRUE(s->read_error.empty()) << s->read_error;
  EXPECT_TRUE(s->has_trailer);
  EXPECT_EQ(s->trailer.end_clock().monotonic_ns(), 4000u);
  EXPECT_EQ(s->header.hostname(), "node1");
  EXPECT_EQ(s->events, events.size());
  EXPECT_EQ(s->dropped_events, 7u);
  ASSERT_EQ(s->processes.size(), direct.processes.size());
  for (size_t i = 0; i < direct.processes.size(); ++i) {
    EXPECT_EQ(s->processes[i].pid, direct.processes[i].pid);
    EXPECT_EQ(s->processes[i].comm, direct.processes[i].comm);
    ASSERT_EQ(s->processes[i].threads.size(), direct.processes[i].threads.size());
    for (size_t j = 0; j < direct.processes[i].threads.size(); ++j) {
      EXPECT_EQ(s->processes[i].threads[j].off_cpu_ns, direct.processes[i].threads[j].off_cpu_ns);
      EXPECT_EQ(s->processes[i].threads[j].syscalls.total_ns,
                direct.processes[i].threads[j].syscalls.total_ns);
    }
  }
  ASSERT_EQ(s->syscalls.size(), 3u);
  EXPECT_EQ(s->syscalls[0].name, "futex");
}

TEST_F(TraceFileTest, TruncatedFileGivesPartialSummaryAndReadError) {
  const std::vector<v1::Event> events = TrainingJobEvents();
  const std::vector<uint64_t> ends = WriteTrace(events);
  // Header end + one end per 2-event batch (the last batch holds 1 event).
  ASSERT_EQ(ends.size(), 1 + (events.size() + 1) / 2);

  // Cut inside the trailer: every event is there, the trailer is not.
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  ASSERT_GT(static_cast<uint64_t>(st.st_size), ends.back() + 2);
  ASSERT_EQ(truncate(path_.c_str(), st.st_size - 2), 0);
  absl::StatusOr<OsSummary> s = SummarizeTraceFile(path_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->has_trailer);
  EXPECT_EQ(s->events, events.size());
  EXPECT_NE(s->read_error.find("offset " + std::to_string(ends.back())), std::string::npos)
      << s->read_error;

  // Cut inside the third batch: only the first two batches (4 events) count.
  ASSERT_EQ(truncate(path_.c_str(), ends[3] - 5), 0);
  s = SummarizeTraceFile(path_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->events, 4u);
  EXPECT_FALSE(s->read_error.empty());
  EXPECT_NE(s->read_error.find("offset " + std::to_string(ends[2])), std::string::npos)
      << s->read_error;
  ASSERT_EQ(s->processes.size(), 1u);
  ASSERT_EQ(s->processes[0].threads.size(), 2u);
  EXPECT_EQ(s->processes[0].threads[1].comm, "pt_dataloader");
  EXPECT_EQ(s->last_event_ns, 1300u);
  EXPECT_EQ(s->dropped_events, 0u);
}

TEST_F(TraceFileTest, MissingOrHeaderlessFileIsAnError) {
  absl::StatusOr<OsSummary> s = SummarizeTraceFile(dir_ + "/does-not-exist.gpuos");
  EXPECT_FALSE(s.ok());

  FILE* f = fopen(path_.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("this is not a trace", f);
  fclose(f);
  s = SummarizeTraceFile(path_);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace gpuos
