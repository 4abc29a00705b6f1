// `gpuos-trace report`: an OsSummary as text tables for people and as a JSON
// document for programs (see report/os_report.h).
#include "export/report/os_report.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "export/report/format.h"
#include "export/report/host_report.h"
#include "export/report/json_writer.h"
#include "export/report/text_table.h"
#include "export/report/trace_identity.h"
#include "stream/trace_completeness.h"

namespace gpuos {
namespace {

// Long tables stay readable; the JSON report always has every row.
constexpr size_t kMaxSyscallRows = 25;
constexpr size_t kMaxThreadRowsPerProcess = 32;

constexpr const char* kCauseNames[5] = {"unknown", "preempted", "futex", "syscall", "page_fault"};

// A process's threads added up, named after the process.
ThreadSummary ProcessTotals(const ProcessSummary& p) {
  ThreadSummary total = SumThreads(p.threads);
  total.tid = p.pid;
  total.comm = p.comm;
  return total;
}

std::string Num(uint64_t n) {
  return absl::StrCat(n);
}

// The columns both activity tables share, after their own leading ones.
const std::vector<TextTable::Column> kActivityColumns = {
    {"vol sw"},      {"invol sw"}, {"off-CPU ms"}, {"runq ms"},    {"faults"},     {"maj flt"},
    {"mmap"},        {"mmap MiB"}, {"mmap ms"},    {"munmap"},     {"munmap MiB"}, {"munmap ms"},
    {"futex waits"}, {"futex ms"}, {"syscalls"},   {"syscall ms"},
};

void AppendActivity(const ThreadSummary& t, std::vector<std::string>& row) {
  for (std::string cell : {Num(t.voluntary_switches), Num(t.involuntary_switches), FormatMs3(t.off_cpu_ns),
                           FormatMs3(t.runqueue_ns), Num(t.page_faults), Num(t.major_page_faults), Num(t.mmap.calls),
                           FormatMiB1(t.mmap.bytes), FormatMs3(t.mmap.total_ns), Num(t.munmap.calls),
                           FormatMiB1(t.munmap.bytes), FormatMs3(t.munmap.total_ns), Num(t.futex_wait.calls),
                           FormatMs3(t.futex_wait.total_ns), Num(t.syscalls.calls), FormatMs3(t.syscalls.total_ns)}) {
    row.push_back(std::move(cell));
  }
}

std::vector<TextTable::Column> WithActivity(std::vector<TextTable::Column> leading) {
  leading.insert(leading.end(), kActivityColumns.begin(), kActivityColumns.end());
  return leading;
}

void WriteHeaderBlock(const OsSummary& s, std::ostream& out) {
  const v1::TraceHeader& h = s.header;
  out << "gpuos-trace OS report\n";
  if (!s.incomplete_reason.empty()) out << "  INCOMPLETE: " << Printable(s.incomplete_reason) << "\n";
  if (const std::string window = FlightWindowNote(h); !window.empty()) {
    out << "  WINDOW:    " << Printable(window) << "\n";
  }
  if (IsAttached(h)) {
    // Attached: the job ran before and goes on after; nothing here says
    // how it started or ended, only what the window saw.
    out << "  attached:  " << AttachText(s) << "\n";
    for (const std::string& line : CudaAttachLines(s)) out << "  cuda:      " << line << "\n";
  } else {
    out << "  command:   " << CommandLine(h) << "\n";
  }
  out << "  host:      " << Printable(h.hostname()) << " (kernel " << Printable(h.kernel_release());
  if (!h.arch().empty()) out << ", " << Printable(h.arch());
  out << ")\n";
  if (!h.tracer_version().empty()) {
    out << "  tracer:    gpuos-trace " << Printable(h.tracer_version());
    if (h.tracer_pid()) out << ", pid " << h.tracer_pid();
    out << "\n";
  }
  out << "  started:   " << WallClock(h.start_clock().realtime_ns()) << "\n";
  out << "  duration:  " << absl::StrFormat("%.3f s", TraceDurationNs(s) / 1e9);
  if (IsAttached(h)) {
    // Loading and unloading the probes take time outside the window, with
    // no event of the job in it.
    out << absl::StrFormat(" of recording; events only within the %.3f s attach window",
                           (AttachEndNs(s) - AttachStartNs(s)) / 1e9);
  }
  if (!s.has_trailer)
    out << "  (no trailer: the recording did not end cleanly; measured from events)";
  out << "\n";
  out << "  events:    " << s.events << "\n";
  if (s.dropped_events == 0) {
    out << "  dropped:   0 events\n";
  } else {
    out << "  DROPPED:   " << s.dropped_events
        << " EVENTS WERE LOST (in the kernel: ring buffer or map full; write_failed: the trace file could not"
           " be written); every total below undercounts\n";
    for (const auto& [reason, n] : s.drops_by_reason) {
      out << "             " << absl::StrFormat("%-32s %d", Printable(reason), n) << "\n";
    }
    if (s.has_trailer && s.trailer.dropped_events() > 0) {
      out << "             (the trailer counts " << s.trailer.dropped_events() << ")\n";
    }
  }
  if (s.unseen_switch_ins > 0) {
    const uint64_t ended = s.unseen_switch_ins_ended_running + s.unseen_switch_ins_ended_by_run_time;
    const uint64_t at_wakeup = s.unseen_switch_ins - std::min(s.unseen_switch_ins, ended);
    out << "  note:      " << s.unseen_switch_ins
        << " off-CPU interval(s) came back without a sched_switch the kernel traced: counted; "
        << s.unseen_switch_ins_ended_running << " end(s) taken at the thread's next syscall (an upper bound), "
        << s.unseen_switch_ins_ended_by_run_time << " from its run time at its next switch-out";
    if (at_wakeup > 0) out << ", " << at_wakeup << " at the wakeup (recorded by an older tracer: a lower bound)";
    out << "\n";
  }
  if (!s.read_error.empty()) {
    out << "  DAMAGED:   the trace file is damaged; this report covers what was read before it "
           "(see the end)\n";
  }
  out << "\n";
  WriteHostsText(h, out);
}

void WriteProcessTable(const OsSummary& s, std::ostream& out) {
  const bool attached = IsAttached(s.header);
  out << "Processes (" << s.processes.size() << (attached ? "; * = an attach target)\n" : "; * = the traced command)\n");
  TextTable table(WithActivity({{"pid"},
                                {"ppid"},
                                {"comm", TextTable::Align::kLeft},
                                {"threads"},
                                {"exit", TextTable::Align::kLeft}}));
  for (const ProcessSummary& p : s.processes) {
    const ThreadSummary total = ProcessTotals(p);
    const bool starred = p.is_root || (attached && IsAttachTarget(s.header, p.pid));
    std::vector<std::string> row = {absl::StrCat(p.pid, starred ? "*" : ""), Num(p.ppid),
                                    Printable(p.comm), Num(p.threads.size()), ExitText(p)};
    AppendActivity(total, row);
    table.AddRow(std::move(row));
  }
  table.Render(out, "  ");
  out << "\n";
}

void WriteThreadTable(const OsSummary& s, std::ostream& out) {
  out << "Threads, by process\n";
  const uint64_t start = TraceStartNs(s);
  TextTable table(WithActivity(
      {{"pid"}, {"tid"}, {"comm", TextTable::Align::kLeft}, {"ended", TextTable::Align::kLeft}}));
  // Rules set off the groups of multi-threaded processes; a run of
  // single-threaded ones reads better without a rule after every line.
  const ProcessSummary* previous = nullptr;
  for (const ProcessSummary& p : s.processes) {
    if (previous && (previous->threads.size() > 1 || p.threads.size() > 1)) table.AddRule();
    previous = &p;

    // The busiest threads, in their order of appearance; the rest are
    // summed into one row.
    std::vector<size_t> shown(p.threads.size());
    for (size_t i = 0; i < shown.size(); ++i) shown[i] = i;
    if (shown.size() > kMaxThreadRowsPerProcess) {
      auto busy = [&](size_t i) {
        return p.threads[i].off_cpu_ns + p.threads[i].syscalls.total_ns;
      };
      std::stable_sort(shown.begin(), shown.end(),
                       [&](size_t a, size_t b) { return busy(a) > busy(b); });
      shown.resize(kMaxThreadRowsPerProcess);
      std::sort(shown.begin(), shown.end());
    }
    std::vector<bool> is_shown(p.threads.size(), false);
    for (size_t i : shown) is_shown[i] = true;

    bool first_row = true;
    for (size_t i : shown) {
      const ThreadSummary& t = p.threads[i];
      std::string ended = "-";
      if (t.exit_ns) {
        ended = t.exit_ns >= start ? absl::StrFormat("+%.3fs", (t.exit_ns - start) / 1e9)
                                   : std::string("before start");
      }
      std::vector<std::string> row = {first_row ? Num(p.pid) : "", Num(t.tid), Printable(t.comm),
                                      ended};
      first_row = false;
      AppendActivity(t, row);
      table.AddRow(std::move(row));
    }
    if (shown.size() < p.threads.size()) {
      ProcessSummary rest;
      for (size_t i = 0; i < p.threads.size(); ++i) {
        if (!is_shown[i]) rest.threads.push_back(p.threads[i]);
      }
      std::vector<std::string> row = {"", "", absl::StrCat("(", rest.threads.size(), " more)"), ""};
      AppendActivity(ProcessTotals(rest), row);
      table.AddRow(std::move(row));
    }
  }
  table.Render(out, "  ");
  out << "\n";
}

void WriteSyscallTable(const OsSummary& s, std::ostream& out) {
  uint64_t all_ns = 0;
  uint64_t all_calls = 0;
  for (const SyscallRow& r : s.syscalls) {
    all_ns += r.total_ns;
    all_calls += r.calls;
  }
  out << "The most expensive OS calls (" << s.syscalls.size() << " syscalls, " << all_calls << " calls, "
      << FormatMs3(all_ns) << " ms in all)\n";
  if (s.syscalls.empty()) {
    out << "  (no syscall statistics in this trace)\n\n";
    return;
  }
  TextTable table({{"#"},
                   {"syscall", TextTable::Align::kLeft},
                   {"calls"},
                   {"total ms"},
                   {"mean us"},
                   {"max us"},
                   {"% time"}});
  const size_t shown = std::min(s.syscalls.size(), kMaxSyscallRows);
  for (size_t i = 0; i < shown; ++i) {
    const SyscallRow& r = s.syscalls[i];
    table.AddRow({Num(i + 1), Printable(r.name), Num(r.calls), FormatMs3(r.total_ns),
                  r.calls ? FormatUs1(static_cast<double>(r.total_ns) / r.calls) : "-",
                  FormatUs1(static_cast<double>(r.max_ns)),
                  all_ns ? absl::StrFormat("%.1f", 100.0 * r.total_ns / all_ns) : "-"});
  }
  table.Render(out, "  ");
  if (shown < s.syscalls.size()) {
    uint64_t rest_ns = 0;
    for (size_t i = shown; i < s.syscalls.size(); ++i) rest_ns += s.syscalls[i].total_ns;
    out << "  ... " << s.syscalls.size() - shown << " more syscalls omitted (" << FormatMs3(rest_ns) << " ms, "
        << absl::StrFormat("%.1f", all_ns ? 100.0 * rest_ns / all_ns : 0.0)
        << "% of syscall time; the JSON report lists all)\n";
  }
  out << "\n";
}

void WriteOffCpuTable(const OsSummary& s, std::ostream& out) {
  out << "Off-CPU time by cause (ms)\n";
  TextTable table({{"pid"},
                   {"comm", TextTable::Align::kLeft},
                   {"off-CPU"},
                   {"preempted"},
                   {"futex"},
                   {"syscall"},
                   {"page fault"},
                   {"unknown"},
                   {"runqueue"}});
  for (const ProcessSummary& p : s.processes) {
    const ThreadSummary t = ProcessTotals(p);
    const uint64_t* c = t.off_cpu_by_cause_ns;
    table.AddRow({Num(p.pid), Printable(p.comm), FormatMs3(t.off_cpu_ns), FormatMs3(c[v1::OFF_CPU_CAUSE_PREEMPTED]),
                  FormatMs3(c[v1::OFF_CPU_CAUSE_FUTEX]), FormatMs3(c[v1::OFF_CPU_CAUSE_SYSCALL]),
                  FormatMs3(c[v1::OFF_CPU_CAUSE_PAGE_FAULT]), FormatMs3(c[v1::OFF_CPU_CAUSE_UNKNOWN]),
                  FormatMs3(t.runqueue_ns)});
  }
  table.Render(out, "  ");
  out << "\n";
}

// Block I/O by issuing thread; only for traces that have any, so that a
// trace without the block I/O source reads as before.
void WriteBlockIoTable(const OsSummary& s, std::ostream& out) {
  if (s.block_io.requests == 0) return;
  out << "Block I/O (" << s.block_io.requests << " requests, " << FormatMiB1(s.block_io.bytes) << " MiB, "
      << FormatMs3(s.block_io.total_ns) << " ms issue to completion, summed over requests)\n";
  TextTable table({{"pid"},
                   {"tid"},
                   {"comm", TextTable::Align::kLeft},
                   {"requests"},
                   {"MiB"},
                   {"total ms"},
                   {"mean us"}});
  auto row = [&](std::string pid, std::string tid, std::string comm, const BlockIoTotals& b) {
    table.AddRow({std::move(pid), std::move(tid), std::move(comm), Num(b.requests), FormatMiB1(b.bytes),
                  FormatMs3(b.total_ns), FormatUs1(static_cast<double>(b.total_ns) / b.requests)});
  };
  for (const ProcessSummary& p : s.processes) {
    for (const ThreadSummary& t : p.threads) {
      if (t.block_io.requests) row(Num(p.pid), Num(t.tid), Printable(t.comm), t.block_io);
    }
  }
  if (s.block_io_unattributed.requests) row("-", "-", "(issued for no known thread)", s.block_io_unattributed);
  table.Render(out, "  ");
  out << "\n";
}

void WriteCalls(JsonWriter& json, std::string_view name, const CallTotals& c, bool with_bytes) {
  json.Key(name);
  json.BeginObject();
  json.Field("calls", c.calls);
  if (with_bytes) json.Field("bytes", c.bytes);
  json.Field("total_ns", c.total_ns);
  json.Field("max_ns", c.max_ns);
  json.EndObject();
}

void WriteBlockIo(JsonWriter& json, std::string_view name, const BlockIoTotals& b) {
  json.Key(name);
  json.BeginObject();
  json.Field("requests", b.requests);
  json.Field("bytes", b.bytes);
  json.Field("total_ns", b.total_ns);
  json.EndObject();
}

// The fields a thread and a process total share.
void WriteActivity(JsonWriter& json, const ThreadSummary& t) {
  json.Key("context_switches");
  json.BeginObject();
  json.Field("voluntary", t.voluntary_switches);
  json.Field("involuntary", t.involuntary_switches);
  json.EndObject();
  json.Field("off_cpu_ns", t.off_cpu_ns);
  json.Field("runqueue_ns", t.runqueue_ns);
  json.Key("off_cpu_by_cause_ns");
  json.BeginObject();
  for (int i = 0; i < 5; ++i) json.Field(kCauseNames[i], t.off_cpu_by_cause_ns[i]);
  json.EndObject();
  json.Field("page_faults", t.page_faults);
  json.Field("major_page_faults", t.major_page_faults);
  WriteCalls(json, "mmap", t.mmap, true);
  WriteCalls(json, "munmap", t.munmap, true);
  WriteCalls(json, "futex_wait", t.futex_wait, false);
  json.Key("futex_wake");
  json.BeginObject();
  json.Field("calls", t.futex_wake_calls);
  json.Field("woken", t.futex_woken);
  json.EndObject();
  WriteCalls(json, "syscalls", t.syscalls, false);
  WriteBlockIo(json, "block_io", t.block_io);
}

void WriteExitStatus(JsonWriter& json, const ProcessSummary& p) {
  json.Key("exit_status");
  if (!p.exited) {
    json.Null();
    return;
  }
  json.BeginObject();
  json.Field("wait_status", p.wait_status);
  if (WIFEXITED(p.wait_status)) {
    json.Field("exit_code", static_cast<int32_t>(WEXITSTATUS(p.wait_status)));
  } else if (WIFSIGNALED(p.wait_status)) {
    json.Field("signal", static_cast<int32_t>(WTERMSIG(p.wait_status)));
    json.Field("core_dumped", static_cast<bool>(WCOREDUMP(p.wait_status)));
  }
  json.Field("text", ExitText(p));
  json.EndObject();
}

// "attach": the window and each process's CUDA attach status; null for a
// launched trace.
void WriteAttach(JsonWriter& json, const OsSummary& s) {
  json.Key("attach");
  if (!IsAttached(s.header)) {
    json.Null();
    return;
  }
  const v1::AttachInfo& a = s.header.attach();
  json.BeginObject();
  json.Key("target_pids");
  json.BeginArray();
  for (uint32_t pid : a.target_pids()) json.Uint(pid);
  json.EndArray();
  json.Field("gpu_procs", a.gpu_procs());
  json.Field("requested_duration_ns", a.requested_duration_ns());
  json.Field("start_ns", AttachStartNs(s));
  json.Field("end_ns", AttachEndNs(s));
  json.Field("duration_ns", AttachEndNs(s) - AttachStartNs(s));
  json.Field("clean_end", s.has_trailer && s.trailer.attach_end_ns() != 0);
  json.Key("cuda");
  json.BeginArray();
  if (s.has_trailer) {
    for (const v1::CudaAttachStatus& c : s.trailer.cuda_attach()) {
      json.BeginObject();
      json.Field("pid", c.pid());
      json.Field("mode", c.mode());
      json.Field("detail", c.detail());
      json.Field("stopped_ns", c.stopped_ns());
      json.Field("kernels", c.kernels());
      json.EndObject();
    }
  }
  json.EndArray();
  json.EndObject();
}

void NullOrString(JsonWriter& json, std::string_view key, const std::string& value) {
  json.Key(key);
  if (value.empty()) {
    json.Null();
  } else {
    json.String(value);
  }
}

void WriteFlightWindowJson(JsonWriter& json, const v1::TraceHeader& h) {
  json.Key("flight_window");
  if (!h.has_flight_window()) {
    json.Null();
    return;
  }
  const v1::FlightWindow& w = h.flight_window();
  json.BeginObject();
  json.Field("start_ns", w.start_ns());
  json.Field("end_ns", w.end_ns());
  json.Field("recording_start_ns", w.recording_start_clock().monotonic_ns());
  json.Field("events_recorded", w.events_recorded());
  json.Field("events_rotated_out", w.events_rotated_out());
  json.Field("size_limit_bytes", w.size_limit_bytes());
  json.Field("duration_limit_ns", w.duration_limit_ns());
  json.Field("reason", w.reason());
  json.Field("dump_index", w.dump_index());
  json.Field("note", FlightWindowNote(h));
  json.EndObject();
}

// "trace": what was traced, where, when, and whether the file is whole.
void WriteTraceJson(JsonWriter& json, const OsSummary& s) {
  const v1::TraceHeader& h = s.header;
  json.Key("trace");
  json.BeginObject();
  json.Key("command_line");
  json.BeginArray();
  for (const std::string& arg : h.command_line()) json.String(arg);
  json.EndArray();
  json.Field("host", h.hostname());
  json.Field("kernel", h.kernel_release());
  json.Field("arch", h.arch());
  json.Field("tracer_version", h.tracer_version());
  json.Field("root_pid", h.root_pid());
  json.Field("start_realtime_ns", h.start_clock().realtime_ns());
  json.Field("start_ns", TraceStartNs(s));
  json.Field("end_ns", TraceEndNs(s));
  json.Field("duration_ns", TraceDurationNs(s));
  json.Field("complete", s.has_trailer && s.incomplete_reason.empty());
  NullOrString(json, "incomplete_reason", s.incomplete_reason);
  WriteFlightWindowJson(json, h);
  json.EndObject();
}

void WriteEventCountsJson(JsonWriter& json, const OsSummary& s) {
  json.Field("events", s.events);
  json.Field("first_event_ns", s.first_event_ns);
  json.Field("last_event_ns", s.last_event_ns);
  json.Field("dropped_events", s.dropped_events);
  json.Field("unseen_switch_ins", s.unseen_switch_ins);
  json.Field("unseen_switch_ins_ended_running", s.unseen_switch_ins_ended_running);
  json.Field("unseen_switch_ins_ended_by_run_time", s.unseen_switch_ins_ended_by_run_time);
  json.Key("drops_by_reason");
  json.BeginObject();
  for (const auto& [reason, n] : s.drops_by_reason) json.Field(reason, n);
  json.EndObject();
  NullOrString(json, "read_error", s.read_error);
}

void WriteProcessJson(JsonWriter& json, const ProcessSummary& p) {
  json.BeginObject();
  json.Field("pid", p.pid);
  json.Field("ppid", p.ppid);
  json.Field("comm", p.comm);
  NullOrString(json, "exec", p.exec_filename);
  json.Field("is_root", p.is_root);
  json.Field("start_ns", p.start_ns);
  json.Field("exited", p.exited);
  json.Field("exit_ns", p.exit_ns);
  WriteExitStatus(json, p);
  json.Key("totals");
  json.BeginObject();
  WriteActivity(json, ProcessTotals(p));
  json.EndObject();
  json.Key("threads");
  json.BeginArray();
  for (const ThreadSummary& t : p.threads) {
    json.BeginObject();
    json.Field("tid", t.tid);
    json.Field("comm", t.comm);
    json.Field("first_seen_ns", t.first_seen_ns);
    json.Field("exit_ns", t.exit_ns);
    WriteActivity(json, t);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

}  // namespace

void WriteOsTextReport(const OsSummary& summary, std::ostream& out) {
  WriteHeaderBlock(summary, out);
  if (summary.processes.empty()) {
    out << "Processes: none in the readable part of the trace\n\n";
  } else {
    WriteProcessTable(summary, out);
    WriteThreadTable(summary, out);
  }
  WriteSyscallTable(summary, out);
  if (!summary.processes.empty()) WriteOffCpuTable(summary, out);
  WriteBlockIoTable(summary, out);
  if (!summary.read_error.empty()) {
    out << "READ ERROR: " << Printable(summary.read_error) << "\n"
        << "  Everything above covers only the part of the trace before the damage.\n";
  }
}

// The report with more members (e.g. the CUDA side's "nvtx" and "cuda")
// written by `extra_members` at the end of the top-level object.
void WriteOsJsonReport(const OsSummary& s, std::ostream& out,
                       const std::function<void(JsonWriter&)>& extra_members) {
  JsonWriter json(out);
  json.BeginObject();
  WriteTraceJson(json, s);
  WriteAttach(json, s);
  WriteHostsJson(s.header, json);
  WriteEventCountsJson(json, s);
  json.Key("processes");
  json.BeginArray();
  for (const ProcessSummary& p : s.processes) WriteProcessJson(json, p);
  json.EndArray();
  json.Key("syscalls");
  json.BeginArray();
  for (const SyscallRow& r : s.syscalls) {
    json.BeginObject();
    json.Field("nr", r.nr);
    json.Field("name", r.name);
    json.Field("calls", r.calls);
    json.Field("total_ns", r.total_ns);
    json.Field("max_ns", r.max_ns);
    json.EndObject();
  }
  json.EndArray();
  // Every request of the trace; "unattributed": issued for no known thread.
  json.Key("block_io");
  json.BeginObject();
  json.Field("requests", s.block_io.requests);
  json.Field("bytes", s.block_io.bytes);
  json.Field("total_ns", s.block_io.total_ns);
  WriteBlockIo(json, "unattributed", s.block_io_unattributed);
  json.EndObject();
  if (extra_members) extra_members(json);
  json.EndObject();
}

void WriteOsJsonReport(const OsSummary& summary, std::ostream& out) {
  WriteOsJsonReport(summary, out, {});
}

}  // namespace gpuos
