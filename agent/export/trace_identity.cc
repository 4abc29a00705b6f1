// Presentation of a recording's identity; see trace_identity.h.
#include "export/trace_identity.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "export/text_table.h"

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
