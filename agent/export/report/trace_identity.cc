// Presentation of a recording's identity; see report/trace_identity.h.
#include "export/report/trace_identity.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "export/report/text_table.h"

namespace gpuos {

ThreadSummary SumThreads(const std::vector<ThreadSummary>& threads) {
  ThreadSummary total;
  auto add = [](CallTotals& into, const CallTotals& from) {
    into.calls += from.calls;
    into.bytes += from.bytes;
    into.total_ns += from.total_ns;
    into.max_ns = std::max(into.max_ns, from.max_ns);
  };
  for (const ThreadSummary& t : threads) {
    total.voluntary_switches += t.voluntary_switches;
    total.involuntary_switches += t.involuntary_switches;
    total.off_cpu_ns += t.off_cpu_ns;
    total.runqueue_ns += t.runqueue_ns;
    for (int i = 0; i < 5; ++i) total.off_cpu_by_cause_ns[i] += t.off_cpu_by_cause_ns[i];
    total.page_faults += t.page_faults;
    total.major_page_faults += t.major_page_faults;
    add(total.mmap, t.mmap);
    add(total.munmap, t.munmap);
    add(total.futex_wait, t.futex_wait);
    total.futex_wake_calls += t.futex_wake_calls;
    total.futex_woken += t.futex_woken;
    add(total.syscalls, t.syscalls);
    total.block_io.requests += t.block_io.requests;
    total.block_io.bytes += t.block_io.bytes;
    total.block_io.total_ns += t.block_io.total_ns;
  }
  return total;
}

uint64_t TraceStartNs(const OsSummary& s) {
  const uint64_t header_start = s.header.start_clock().monotonic_ns();
  return header_start ? header_start : s.first_event_ns;
}
uint64_t TraceEndNs(const OsSummary& s) {
  if (s.has_trailer && s.trailer.end_clock().monotonic_ns())
    return s.trailer.end_clock().monotonic_ns();
  return std::max(s.last_event_ns, TraceStartNs(s));
}
uint64_t TraceDurationNs(const OsSummary& s) {
  return TraceEndNs(s) - TraceStartNs(s);
}

std::string ExitText(const ProcessSummary& p) {
  if (!p.exited) return "-";
  const int status = p.wait_status;
  if (WIFEXITED(status)) return absl::StrCat("exit ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    std::string text = abbrev ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
    if (WCOREDUMP(status)) text += " (core)";
    return text;
  }
  return absl::StrFormat("status 0x%x", static_cast<unsigned>(status));
}

std::string CommandLine(const v1::TraceHeader& header) {
  std::vector<std::string> words;
  for (const std::string& arg : header.command_line()) {
    const bool plain =
        !arg.empty() &&
        arg.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") ==
            std::string::npos;
    if (plain) {
      words.push_back(Printable(arg));
    } else {
      std::string quoted = "'";
      for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      words.push_back(Printable(quoted + "'"));
    }
  }
  return words.empty() ? "(attached; no command)" : absl::StrJoin(words, " ");
}

bool IsAttached(const v1::TraceHeader& header) { return header.has_attach(); }

bool IsAttachTarget(const v1::TraceHeader& header, uint32_t pid) {
  if (!header.has_attach()) return false;
  for (uint32_t target : header.attach().target_pids()) {
    if (target == pid) return true;
  }
  return false;
}

uint64_t AttachStartNs(const OsSummary& s) {
  const uint64_t start = s.header.attach().start_ns();
  return start ? start : TraceStartNs(s);
}

uint64_t AttachEndNs(const OsSummary& s) {
  if (s.has_trailer && s.trailer.attach_end_ns()) return s.trailer.attach_end_ns();
  return std::max(TraceEndNs(s), AttachStartNs(s));
}

namespace {

// "30s", "1500ms", "2.5s": how --duration was probably typed.
std::string DurationFlag(uint64_t ns) {
  if (ns % 1000000000ull == 0) return absl::StrCat(ns / 1000000000ull, "s");
  if (ns % 1000000ull == 0) return absl::StrCat(ns / 1000000ull, "ms");
  return absl::StrFormat("%.6gs", ns / 1e9);
}

}  // namespace

std::string AttachText(const OsSummary& s) {
  const v1::AttachInfo& a = s.header.attach();
  std::vector<std::string> targets;
  for (int i = 0; i < a.target_pids_size(); ++i) {
    const uint32_t pid = a.target_pids(i);
    std::string name;
    // The header's command line is the first target's.
    if (i == 0 && s.header.command_line_size() > 0) name = CommandLine(s.header);
    for (const ProcessSummary& p : s.processes) {
      if (name.empty() && p.pid == pid) name = Printable(p.comm);
    }
    targets.push_back(name.empty() ? absl::StrCat(pid) : absl::StrCat(pid, " (", name, ")"));
  }
  std::string text = targets.empty() ? std::string("no target pid recorded")
                                     : absl::StrCat(targets.size() == 1 ? "pid " : "pids ",
                                                    absl::StrJoin(targets, ", "));
  // The header clock pair maps the monotonic attach time onto wall time.
  const v1::ClockPair& clock = s.header.start_clock();
  const uint64_t start = AttachStartNs(s);
  uint64_t realtime = 0;
  if (clock.realtime_ns()) {
    realtime = clock.realtime_ns() + start - clock.monotonic_ns();
  }
  absl::StrAppend(&text, " from ", WallClock(realtime), " for ",
                  absl::StrFormat("%.1f s", (AttachEndNs(s) - start) / 1e9));
  std::vector<std::string> how;
  if (a.requested_duration_ns()) how.push_back(absl::StrCat("--duration ", DurationFlag(a.requested_duration_ns())));
  if (a.gpu_procs()) how.push_back("--gpu-procs");
  if (!(s.has_trailer && s.trailer.attach_end_ns())) how.push_back("no clean end: up to the last event");
  if (!how.empty()) absl::StrAppend(&text, " (", absl::StrJoin(how, ", "), ")");
  return text;
}

std::vector<std::string> CudaAttachLines(const OsSummary& s) {
  std::vector<std::string> lines;
  if (!s.has_trailer) return lines;
  for (const v1::CudaAttachStatus& c : s.trailer.cuda_attach()) {
    std::string line = absl::StrCat("pid ", c.pid(), ": ", c.mode().empty() ? "unknown" : Printable(c.mode()));
    if (c.stopped_ns()) absl::StrAppend(&line, absl::StrFormat("; stopped %.3f ms", c.stopped_ns() / 1e6));
    if (c.mode() != "none" && c.mode() != "uprobes") absl::StrAppend(&line, "; ", c.kernels(), " kernels");
    if (c.mode() == "uprobes") absl::StrAppend(&line, "; CPU side of driver calls only");
    if (!c.detail().empty()) absl::StrAppend(&line, "; ", Printable(c.detail()));
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string WallClock(uint64_t realtime_ns) {
  if (!realtime_ns) return "unknown";
  const time_t secs = static_cast<time_t>(realtime_ns / 1000000000ull);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace gpuos
