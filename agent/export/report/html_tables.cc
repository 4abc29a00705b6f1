// The report page's CUDA/NVTX and OS tables; see report/html_tables.h.
#include "export/report/html_tables.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/cuda_summary.h"
#include "export/report/format.h"
#include "export/report/html_blocks.h"
#include "export/report/step_columns.h"
#include "export/report/text_table.h"
#include "export/report/trace_identity.h"
#include "export/report/wait_chain_text.h"
#include "stream/trace_completeness.h"

namespace gpuos {
namespace {

using html::HBar;
using html::NameTd;
using html::Stat;
using html::Td;
using html::Thead;

std::string E(std::string_view text) { return HtmlEscape(text); }

class HtmlTables {
 public:
  HtmlTables(const OsSummary& os, const CudaSummary& cuda, const HtmlReportOptions& options, std::ostream& out)
      : os_(os), cuda_(cuda), opt_(options), out_(out) {}

  void Write() {
    CudaSection();
    OsSection();
  }

 private:
  void RowsOmitted(size_t total) {
    if (total > opt_.max_table_rows) {
      out_ << "<p class=\"note\">" << total - opt_.max_table_rows
           << " more rows not shown; the JSON report lists all.</p>\n";
    }
  }

  // Kernels, API calls, syncs, NVTX ranges: ranked by total time.
  void NamedTable(const char* id, const std::vector<NamedTotals>& rows, bool with_domain, uint64_t whole_ns) {
    std::vector<std::string> titles = {"#", "<name"};
    if (with_domain) titles.push_back("<domain");
    for (const char* t : {"count", "total ms", "mean us", "max us"}) titles.push_back(t);
    if (whole_ns) {
      titles.push_back("% of total");
      titles.push_back("<");
    }
    out_ << "<div class=\"scroll\"><table class=\"sortable\" id=\"" << id << "\">" << Thead(titles) << "<tbody>";
    for (size_t i = 0; i < rows.size() && i < opt_.max_table_rows; ++i) {
      const NamedTotals& r = rows[i];
      out_ << "<tr>" << Td(absl::StrCat(i + 1)) << NameTd(r.name);
      if (with_domain) out_ << Td(E(r.domain), true);
      out_ << Td(absl::StrCat(r.count)) << Td(FormatMsAutoDecimals(r.total_ns))
           << Td(FormatUs1(r.count ? static_cast<double>(r.total_ns) / r.count : 0)) << Td(FormatUs1(r.max_ns));
      if (whole_ns) {
        const double share = Share(r.total_ns, whole_ns);
        out_ << Td(FormatPct1(share)) << "<td class=\"barcell\">" << HBar(share, "k-bar") << "</td>";
      }
      out_ << "</tr>";
    }
    out_ << "</tbody></table></div>\n";
    RowsOmitted(rows.size());
  }

  void CudaSection() {
    out_ << "<section id=\"cuda\">\n<h2>CUDA and NVTX</h2>\n";
    if (cuda_.empty()) {
      out_ << "<p class=\"missing\">No CUDA or NVTX events in this trace.</p><p class=\"note\">The CUDA shim "
              "records them inside the traced processes: it was left out (<code>--no-cuda</code>), could not be "
              "loaded, or the program never used CUDA or NVTX. Without them there are no kernels, copies or "
              "GPU parts of steps.</p></section>\n";
      return;
    }
    if (cuda_.cpu_side_only()) {
      out_ << "<div class=\"alert warn\" id=\"cpu-side-only\">" << E(kCpuSideOnlyText) << ".</div>\n";
    }
    for (const ShimProcessStatus& p : cuda_.shims) {
      if (!p.cupti_status.empty() && !p.cupti_active) {
        out_ << "<div class=\"alert warn\">pid " << p.pid << ": " << E(p.cupti_status) << "</div>\n";
      }
    }
    if (cuda_.kernel_count) {
      out_ << "<h3>Top kernels by GPU time</h3>\n<div class=\"stats\">"
           << Stat(absl::StrCat(cuda_.kernel_count), "kernel launches")
           << Stat(FormatMsAutoDecimals(cuda_.kernel_total_ns) + " ms", "on the GPU")
           << Stat(absl::StrCat(cuda_.kernels.size()), "distinct kernels");
      if (cuda_.launch_delay.count()) {
        const LatencyHistogram& h = cuda_.launch_delay;
        out_ << Stat(FormatUs1(h.Quantile(0.5)) + " us", "launch-to-start p50")
             << Stat(FormatUs1(h.Quantile(0.99)) + " us", "launch-to-start p99");
      }
      out_ << "</div>\n";
      NamedTable("kernels", cuda_.kernels, false, cuda_.kernel_total_ns);
    } else {
      out_ << "<p class=\"missing\">No GPU kernels recorded.</p>\n";
    }
    if (!cuda_.memcpy.empty()) {
      out_ << "<h3>Memory copies by direction and memory kinds</h3>\n<table class=\"sortable\" id=\"memcpy\">"
           << Thead({"<direction", "<src", "<dst", "count", "MiB", "total ms", "GB/s"}) << "<tbody>";
      for (const MemcpyTotals& m : cuda_.memcpy) {
        const bool pageable = m.src_kind == v1::MEMORY_PAGEABLE || m.dst_kind == v1::MEMORY_PAGEABLE;
        out_ << (pageable ? "<tr class=\"warnrow\" title=\"pageable host memory: the copy is synchronous\">" : "<tr>")
             << Td(MemcpyDirectionName(m.direction), true) << Td(MemoryKindName(m.src_kind), true)
             << Td(MemoryKindName(m.dst_kind), true) << Td(absl::StrCat(m.count)) << Td(FormatMiB1(m.bytes))
             << Td(FormatMsAutoDecimals(m.total_ns)) << Td(absl::StrFormat("%.2f", m.gb_per_s())) << "</tr>";
      }
      out_ << "</tbody></table>\n<p class=\"note\">Rows shaded red touch pageable host memory.</p>\n";
    }
    if (cuda_.memset_count) {
      out_ << "<p>Memsets: " << cuda_.memset_count << ", " << FormatMiB1(cuda_.memset_bytes) << " MiB, "
           << FormatMsAutoDecimals(cuda_.memset_total_ns) << " ms.</p>\n";
    }
    if (!cuda_.api.empty()) {
      out_ << "<h3>CUDA API calls by CPU time</h3>\n";
      NamedTable("cuda-api", cuda_.api, false, 0);
    }
    if (!cuda_.sync.empty()) {
      out_ << "<h3>GPU synchronization waits</h3>\n";
      NamedTable("sync", cuda_.sync, false, 0);
    }
    out_ << "<h3>NVTX ranges</h3>\n";
    if (cuda_.nvtx.empty()) {
      out_ << "<p class=\"missing\">No NVTX ranges recorded.</p>\n";
    } else {
      NamedTable("nvtx", cuda_.nvtx, true, 0);
    }
    out_ << "</section>\n";
  }

  static std::vector<std::string> ActivityTitles() {
    return {"vol sw", "invol sw", "off-CPU ms", "preempted ms", "futex ms", "syscall ms", "page fault ms",
            "runq ms",  "faults",   "maj flt",    "mmap",         "mmap MiB", "munmap",     "munmap MiB",
            "futex waits", "syscalls", "syscall ms (in calls)"};
  }
  std::string ActivityCells(const ThreadSummary& t) {
    const uint64_t* c = t.off_cpu_by_cause_ns;
    return absl::StrCat(
        Td(absl::StrCat(t.voluntary_switches)), Td(absl::StrCat(t.involuntary_switches)),
        Td(FormatMsAutoDecimals(t.off_cpu_ns)), Td(FormatMsAutoDecimals(c[v1::OFF_CPU_CAUSE_PREEMPTED])),
        Td(FormatMsAutoDecimals(c[v1::OFF_CPU_CAUSE_FUTEX])), Td(FormatMsAutoDecimals(c[v1::OFF_CPU_CAUSE_SYSCALL])),
        Td(FormatMsAutoDecimals(c[v1::OFF_CPU_CAUSE_PAGE_FAULT])), Td(FormatMsAutoDecimals(t.runqueue_ns)),
        Td(absl::StrCat(t.page_faults)), Td(absl::StrCat(t.major_page_faults)), Td(absl::StrCat(t.mmap.calls)),
        Td(FormatMiB1(t.mmap.bytes)), Td(absl::StrCat(t.munmap.calls)), Td(FormatMiB1(t.munmap.bytes)),
        Td(absl::StrCat(t.futex_wait.calls)), Td(absl::StrCat(t.syscalls.calls)),
        Td(FormatMsAutoDecimals(t.syscalls.total_ns)));
  }

  void OsSection() {
    out_ << "<section id=\"os\">\n<h2>Processes, threads and syscalls</h2>\n";
    if (os_.processes.empty()) {
      out_ << "<p class=\"missing\">No processes in the readable part of the trace.</p>\n";
    } else {
      std::vector<std::string> titles = {"pid", "ppid", "<comm", "threads", "<exit"};
      for (std::string& t : ActivityTitles()) titles.push_back(std::move(t));
      const bool attached = IsAttached(os_.header);
      out_ << "<h3>Processes (" << os_.processes.size()
           << (attached ? "; * = an attach target)</h3>" : "; * = the traced command)</h3>")
           << "\n<div class=\"scroll\"><table class=\"sortable\" id=\"processes\">"
           << Thead(titles) << "<tbody>";
      size_t threads = 0;
      for (const ProcessSummary& p : os_.processes) {
        threads += p.threads.size();
        const bool starred = p.is_root || (attached && IsAttachTarget(os_.header, p.pid));
        out_ << "<tr>" << Td(absl::StrCat(p.pid, starred ? "*" : "")) << Td(absl::StrCat(p.ppid)) << NameTd(p.comm)
             << Td(absl::StrCat(p.threads.size())) << Td(E(ExitText(p)), true) << ActivityCells(SumThreads(p.threads))
             << "</tr>";
      }
      out_ << "</tbody></table></div>\n";

      titles = {"pid", "tid", "<comm", "<ended"};
      for (std::string& t : ActivityTitles()) titles.push_back(std::move(t));
      out_ << "<details" << (threads <= 40 ? " open" : "") << "><summary>Threads (" << threads
           << ")</summary>\n<div class=\"scroll\"><table class=\"sortable\" id=\"threads\">" << Thead(titles)
           << "<tbody>";
      const uint64_t start = TraceStartNs(os_);
      for (const ProcessSummary& p : os_.processes) {
        // The busiest threads, in their order of appearance; the rest summed.
        std::vector<size_t> shown(p.threads.size());
        for (size_t i = 0; i < shown.size(); ++i) shown[i] = i;
        if (shown.size() > opt_.max_thread_rows) {
          auto busy = [&](size_t i) { return p.threads[i].off_cpu_ns + p.threads[i].syscalls.total_ns; };
          std::stable_sort(shown.begin(), shown.end(), [&](size_t x, size_t y) { return busy(x) > busy(y); });
          shown.resize(opt_.max_thread_rows);
          std::sort(shown.begin(), shown.end());
        }
        std::vector<bool> is_shown(p.threads.size(), false);
        for (size_t i : shown) {
          is_shown[i] = true;
          const ThreadSummary& t = p.threads[i];
          std::string ended = "-";
          if (t.exit_ns) {
            ended = t.exit_ns >= start ? absl::StrFormat("+%.3fs", (t.exit_ns - start) / 1e9) : "before start";
          }
          out_ << "<tr>" << Td(absl::StrCat(p.pid)) << Td(absl::StrCat(t.tid)) << NameTd(t.comm) << Td(ended, true)
               << ActivityCells(t) << "</tr>";
        }
        if (shown.size() < p.threads.size()) {
          std::vector<ThreadSummary> rest;
          for (size_t i = 0; i < p.threads.size(); ++i) {
            if (!is_shown[i]) rest.push_back(p.threads[i]);
          }
          out_ << "<tr>" << Td(absl::StrCat(p.pid)) << Td("") << Td(absl::StrCat("(", rest.size(), " more)"), true)
               << Td("", true) << ActivityCells(SumThreads(rest)) << "</tr>";
        }
      }
      out_ << "</tbody></table></div></details>\n";
    }
    BlockIoTable();
    SyscallTable();
    out_ << "</section>\n";
  }

  // Only in traces with block I/O requests: a page without them reads as
  // before.
  void BlockIoTable() {
    const BlockIoTotals& all = os_.block_io;
    if (all.requests == 0) return;
    out_ << "<h3>Block I/O by issuing thread (" << all.requests << " requests, " << FormatMiB1(all.bytes) << " MiB, "
         << FormatMsAutoDecimals(all.total_ns) << " ms issue to completion)</h3>\n"
         << "<div class=\"scroll\"><table class=\"sortable\" id=\"block-io\">"
         << Thead({"pid", "tid", "<comm", "requests", "MiB", "total ms", "mean us"}) << "<tbody>";
    auto row = [&](const std::string& pid, const std::string& tid, const std::string& comm, const BlockIoTotals& b) {
      out_ << "<tr>" << Td(pid) << Td(tid) << NameTd(comm) << Td(absl::StrCat(b.requests)) << Td(FormatMiB1(b.bytes))
           << Td(FormatMsAutoDecimals(b.total_ns)) << Td(FormatUs1(static_cast<double>(b.total_ns) / b.requests))
           << "</tr>";
    };
    for (const ProcessSummary& p : os_.processes) {
      for (const ThreadSummary& t : p.threads) {
        if (t.block_io.requests) row(absl::StrCat(p.pid), absl::StrCat(t.tid), t.comm, t.block_io);
      }
    }
    if (os_.block_io_unattributed.requests) {
      row("-", "-", "(issued for no known thread)", os_.block_io_unattributed);
    }
    out_ << "</tbody></table></div>\n<p class=\"note\">A request's time runs from its issue to the device to its "
            "completion; overlapping requests add up.</p>\n";
  }

  void SyscallTable() {
    uint64_t all_ns = 0, all_calls = 0;
    for (const SyscallRow& r : os_.syscalls) {
      all_ns += r.total_ns;
      all_calls += r.calls;
    }
    out_ << "<h3>The most expensive OS calls (" << os_.syscalls.size() << " syscalls, " << all_calls << " calls, "
         << FormatMsAutoDecimals(all_ns) << " ms in all)</h3>\n";
    if (os_.syscalls.empty()) {
      out_ << "<p class=\"missing\">No syscall statistics in this trace.</p>\n";
      return;
    }
    out_ << "<div class=\"scroll\"><table class=\"sortable\" id=\"syscalls\">"
         << Thead({"#", "<syscall", "calls", "total ms", "mean us", "max us", "% time", "<"}) << "<tbody>";
    for (size_t i = 0; i < os_.syscalls.size() && i < opt_.max_table_rows; ++i) {
      const SyscallRow& r = os_.syscalls[i];
      const double share = Share(r.total_ns, all_ns);
      out_ << "<tr>" << Td(absl::StrCat(i + 1)) << NameTd(r.name) << Td(absl::StrCat(r.calls))
           << Td(FormatMsAutoDecimals(r.total_ns))
           << Td(r.calls ? FormatUs1(static_cast<double>(r.total_ns) / r.calls) : "-") << Td(FormatUs1(r.max_ns))
           << Td(FormatPct1(share)) << "<td class=\"barcell\">" << HBar(share, "k-bar") << "</td></tr>";
    }
    out_ << "</tbody></table></div>\n";
    RowsOmitted(os_.syscalls.size());
  }

  const OsSummary& os_;
  const CudaSummary& cuda_;
  const HtmlReportOptions& opt_;
  std::ostream& out_;
};

}  // namespace

void WriteHtmlTableSections(const OsSummary& os, const CudaSummary& cuda, const HtmlReportOptions& options,
                            std::ostream& out) {
  HtmlTables(os, cuda, options, out).Write();
}

}  // namespace gpuos
