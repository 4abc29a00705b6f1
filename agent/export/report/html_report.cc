// The report as one self-contained HTML page; see report/html_report.h.  Charts are
// SVG written here, not drawn by script, so the page reads the same with
// scripts off, in a mail client or in a file viewer; the only script makes
// table columns sortable.
// The style sheet and the script are files, compiled in: assets/report.css
// (colour classes k-* set both `fill` (SVG) and `background` (legend
// swatches, HTML bars), so one name serves both) and assets/report.js (click
// a column title to sort its table, numbers by value, the rest as text; the
// footer rows stay put; it marks the root element, so a test can tell that
// the page's script ran).
#include "export/report/html_report.h"

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
#include "export/report/assets/report_css.h"
#include "export/report/assets/report_js.h"
#include "export/report/format.h"
#include "export/report/html_blocks.h"
#include "export/report/html_rank_section.h"
#include "export/report/html_step_chart.h"
#include "export/report/html_tables.h"
#include "export/report/step_columns.h"
#include "export/report/sync_drain_text.h"
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

const char* const kStageCss[] = {"k-data", "k-copy", "k-launch", "k-kern", "k-comm", "k-os", "k-other"};
static_assert(std::size(kStageCss) == kStageCount);

class HtmlReport {
 public:
  HtmlReport(const TraceSummary& summary, const StepAnalysis& steps, const Diagnosis& diagnosis,
             const HtmlReportOptions& options, const RankAnalysis* ranks, std::ostream& out)
      : os_(summary.os), cuda_(summary.cuda), a_(steps), d_(diagnosis), opt_(options), ranks_(ranks), out_(out) {}

  void Write() {
    out_ << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         << "<title>gpuos-trace: " << E(CommandLine(os_.header)) << "</title>\n<style>\n" << kReportCss
         << "</style>\n</head>\n<body>\n<main>\n";
    Header();
    DiagnosisBox();
    Steps();
    if (ranks_ != nullptr) WriteHtmlRankSection(*ranks_, a_.pid, out_);
    if (a_.has_steps()) {
      StageSection();
      IdleSection();
      OsCostSection();
    }
    WriteHtmlTableSections(os_, cuda_, opt_, out_);
    out_ << "<footer>Written by gpuos-trace from " << E(os_.header.hostname())
         << "'s trace. Numbers are the text report's; <code>gpuos-trace report FILE --format json</code> lists "
            "every row and every step.</footer>\n</main>\n<script>\n"
         << kReportJs << "</script>\n</body>\n</html>\n";
  }

 private:
  bool Measured(const StepRecord& s) const { return !s.warmup || a_.summary_includes_warmup; }

  void Header() {
    const v1::TraceHeader& h = os_.header;
    out_ << "<header>\n<h1>gpuos-trace report</h1>\n<code class=\"cmd\">" << E(CommandLine(h)) << "</code>\n";
    if (IsAttached(h)) {
      // An attached run: the window, and how each process's CUDA side was
      // recorded; nothing about how the job started or ended.
      out_ << "<div class=\"alert warn\" id=\"attach\"><b>Attached</b> to " << E(AttachText(os_)) << ".";
      const std::vector<std::string> lines = CudaAttachLines(os_);
      if (!lines.empty()) {
        out_ << "<ul>";
        for (const std::string& line : lines) out_ << "<li>CUDA " << E(line) << "</li>";
        out_ << "</ul>";
      }
      out_ << "</div>\n";
    }
    out_ << "<dl class=\"meta\">";
    auto item = [&](const char* term, const std::string& escaped) {
      out_ << "<dt>" << term << "</dt><dd>" << escaped << "</dd>";
    };
    std::string host = E(h.hostname());
    if (!h.kernel_release().empty()) absl::StrAppend(&host, " (kernel ", E(h.kernel_release()));
    if (!h.arch().empty()) absl::StrAppend(&host, ", ", E(h.arch()));
    if (!h.kernel_release().empty()) host += ")";
    item("host", host);
    item("started", WallClock(h.start_clock().realtime_ns()));
    const double seconds = (TraceEndNs(os_) - TraceStartNs(os_)) / 1e9;
    item("duration", absl::StrFormat("%.3f s%s", seconds,
                                     os_.has_trailer ? "" : " (no trailer: the recording did not end cleanly; "
                                                            "measured from events)"));
    if (IsAttached(h)) item("attach window", absl::StrFormat("%.3f s", (AttachEndNs(os_) - AttachStartNs(os_)) / 1e9));
    item("events", absl::StrCat(os_.events));
    item("dropped", os_.dropped_events ? absl::StrCat("<b style=\"color:#c0392b\">", os_.dropped_events, "</b>")
                                       : std::string("0"));
    item("processes", absl::StrCat(os_.processes.size()));
    if (!h.tracer_version().empty()) {
      item("tracer", absl::StrCat("gpuos-trace ", E(h.tracer_version()),
                                  h.tracer_pid() ? absl::StrCat(", pid ", h.tracer_pid()) : std::string()));
    }
    item("steps", a_.has_steps() ? absl::StrCat(a_.steps.size(), " (", a_.measured_steps, " measured)")
                                 : std::string("none found"));
    out_ << "</dl>\n";
    if (!os_.incomplete_reason.empty()) {
      out_ << "<div class=\"alert bad\" id=\"incomplete\">INCOMPLETE: " << E(os_.incomplete_reason) << "</div>\n";
    }
    if (const std::string window = FlightWindowNote(h); !window.empty()) {
      out_ << "<div class=\"alert warn\" id=\"flight-window\">WINDOW: " << E(window) << "</div>\n";
    }
    if (os_.dropped_events) {
      out_ << "<div class=\"alert bad\" id=\"dropped\">" << os_.dropped_events
           << " EVENTS WERE LOST (in the kernel: ring buffer or map full; write_failed: the trace file could not be"
              " written): every total below undercounts.";
      if (!os_.drops_by_reason.empty()) {
        out_ << "<table><tbody>";
        for (const auto& [reason, n] : os_.drops_by_reason) {
          out_ << "<tr>" << Td(E(reason), true) << Td(absl::StrCat(n)) << "</tr>";
        }
        out_ << "</tbody></table>";
      }
      if (os_.has_trailer && os_.trailer.dropped_events() > 0) {
        out_ << "(the trailer counts " << os_.trailer.dropped_events() << ")";
      }
      out_ << "</div>\n";
    }
    for (const ShimProcessStatus& p : cuda_.shims) {
      if (p.dropped) {
        out_ << "<div class=\"alert bad\">pid " << p.pid << ": the CUDA shim dropped " << p.dropped
             << " events; the CUDA totals undercount.</div>\n";
      }
    }
    if (!os_.read_error.empty()) {
      out_ << "<div class=\"alert bad\">DAMAGED TRACE: this page covers only what was read before the damage: "
           << E(os_.read_error) << "</div>\n";
    }
    out_ << "<nav><a href=\"#diagnosis\">diagnosis</a><a href=\"#steps\">steps</a>";
    if (a_.has_steps()) {
      out_ << "<a href=\"#stages\">stages</a><a href=\"#gpu-idle\">GPU idle</a><a href=\"#os-costs\">OS costs</a>";
    }
    out_ << "<a href=\"#cuda\">CUDA &amp; NVTX</a><a href=\"#os\">processes &amp; syscalls</a></nav>\n</header>\n";
  }

  void FindingText(const Finding& f) {
    if (!f.evidence.empty()) {
      out_ << "<p class=\"evidence\"><span class=\"diag-label\">Evidence</span>" << E(f.evidence) << "</p>";
    }
    if (!f.recommendation.empty()) {
      out_ << "<p class=\"recommendation\"><span class=\"diag-label\">Recommendation</span>" << E(f.recommendation)
           << "</p>";
    }
  }

  static std::string GainBadge(const Finding& f) {
    return f.gain ? absl::StrFormat("gain %s%% of the mean step", FormatPct1(*f.gain))
                  : std::string("gain not estimated");
  }

  void DiagnosisBox() {
    const bool found = d_.primary.bottleneck != Bottleneck::kNoSteps &&
                       d_.primary.bottleneck != Bottleneck::kNoGpuActivity &&
                       d_.primary.bottleneck != Bottleneck::kNoneDominant;
    out_ << "<section id=\"diagnosis\" class=\"diagnosis" << (found ? " found" : "") << "\">\n<h2>Diagnosis</h2>\n"
         << "<div class=\"diag\"><div class=\"diag-title\" data-bottleneck=\"" << BottleneckKey(d_.primary.bottleneck)
         << "\">" << E(BottleneckTitle(d_.primary.bottleneck));
    if (found) {
      out_ << "<span class=\"diag-score\">explains " << FormatPct1(d_.primary.score) << "% of step time</span>"
           << "<span class=\"diag-score\">" << E(GainBadge(d_.primary)) << "</span>";
    }
    out_ << "</div>\n";
    if (!d_.headline.empty() && d_.headline != BottleneckTitle(d_.primary.bottleneck)) {
      out_ << "<p class=\"diag-headline\">" << E(d_.headline) << "</p>";
    }
    FindingText(d_.primary);
    if (!d_.secondary.empty()) {
      out_ << "<h3>Also found (by expected gain)</h3><ul class=\"also\">";
      for (const Finding& f : d_.secondary) {
        out_ << "<li><b>" << E(BottleneckTitle(f.bottleneck)) << "</b> <span class=\"note\">(" << FormatPct1(f.score)
             << "% of step time, " << E(GainBadge(f)) << ")</span>";
        FindingText(f);
        out_ << "</li>";
      }
      out_ << "</ul>";
    }
    StallSteps();
    out_ << "</div>\n</section>\n";
  }

  // The stalled steps behind an intermittent_stalls finding, by index.
  void StallSteps() {
    const IntermittentStalls& s = d_.stalls;
    if (!s.found() || s.share_of_run < kStallCostShare) return;
    out_ << "<p class=\"note\">Stalled steps (longer than " << FormatMs3(s.threshold_ns) << " ms; median "
         << FormatMs3(s.median_ns) << " ms): ";
    constexpr size_t kShown = 40;
    for (size_t k = 0; k < s.stalled.size() && k < kShown; ++k) {
      out_ << (k ? ", " : "") << a_.steps[s.stalled[k]].index;
    }
    if (s.stalled.size() > kShown) out_ << ", ... (" << s.stalled.size() - kShown << " more)";
    out_ << "</p>";
  }

  void Steps() {
    out_ << "<section id=\"steps\">\n<h2>Training steps</h2>\n";
    if (!a_.has_steps()) {
      out_ << "<p class=\"missing\">No training steps found";
      // The diagnosis above quotes the analysis' note already.
      if (a_.note != d_.primary.evidence) out_ << ": " << E(a_.note);
      out_ << ".</p>"
           << "<p class=\"note\">Steps come from NVTX ranges named like <code>step N</code> (change with "
              "<code>--step-regex</code>) or, in PyTorch scripts, from <code>optimizer.step()</code>. Without them "
              "there are no per-step bars, stages, GPU idle attribution or diagnosis; the tables below still "
              "show the whole run.</p>";
      if (!a_.read_error.empty()) out_ << "<p class=\"note\">(read up to the damage: " << E(a_.read_error) << ")</p>";
      out_ << "</section>\n";
      return;
    }
    const size_t warmup = a_.steps.size() - (a_.summary_includes_warmup ? 0 : a_.all_steps);
    out_ << "<p>" << a_.steps.size() << " steps of thread " << a_.tid << " <b>" << E(a_.thread_comm) << "</b> (pid "
         << a_.pid << "), from "
         << StepSourceText(a_.source) << "; ";
    if (a_.summary_includes_warmup) {
      out_ << "every step is warmup, so the summaries include them.";
    } else {
      out_ << warmup << " warmup step" << (warmup == 1 ? "" : "s") << " left out of the summaries.";
    }
    if (a_.other_threads_with_steps) {
      out_ << " " << a_.other_threads_with_steps << " other thread(s) also had step ranges; only this one is analyzed.";
    }
    out_ << "</p>\n";
    if (!a_.driving_thread_note.empty()) {
      out_ << "<p class=\"note\">Driving thread: " << E(a_.driving_thread_note) << "</p>\n";
    }
    if (StepSourceIsInferred(a_.source)) {
      out_ << "<p class=\"note\" id=\"step-source\">" << E(a_.note) << "</p>\n";
    }
    CaptureNote();
    // Wall time needs no CUDA detail: over every measured step.
    const DistributionStats& wall = a_.all_steps_duration_ns;
    out_ << "<div class=\"stats\">" << Stat(absl::StrCat(a_.all_steps), "measured steps")
         << Stat(FormatMsAutoDecimals(wall.mean) + " ms", "mean step")
         << Stat(FormatMsAutoDecimals(wall.p50) + " ms", "p50") << Stat(FormatMsAutoDecimals(wall.p95) + " ms", "p95")
         << Stat(FormatMsAutoDecimals(wall.min) + " ms", "min") << Stat(FormatMsAutoDecimals(wall.max) + " ms", "max")
         << Stat(FormatPct1(Share(a_.measured_total.gpu.idle_ns, a_.measured_wall_ns)) + "%", "GPU idle") << "</div>\n";

    const size_t shown = std::min(a_.steps.size(), opt_.max_step_bars);
    out_ << "<h3>Launching thread, per step (CPU side)</h3>\n";
    html::WriteLegend(html::CpuParts(), warmup > 0, out_);
    const size_t clipped = html::WriteStepChart(a_, "cpu", html::CpuParts(), shown, out_);
    out_ << "<h3>GPU, per step (the launching process's kernels, copies and memsets on every stream)</h3>\n";
    html::WriteLegend(html::GpuParts(), warmup > 0, out_);
    html::WriteStepChart(a_, "gpu", html::GpuParts(), shown, out_);
    out_ << "<p class=\"note\">Each bar is one step; its parts add up to the step's wall time. Hover over a bar for "
            "its numbers. The dashed line is the mean measured step.";
    if (clipped) {
      out_ << " " << clipped << " step" << (clipped == 1 ? " is" : "s are")
           << " taller than the scale: cut off at the top and marked with a triangle.";
    }
    out_ << "</p>\n";
    if (shown < a_.steps.size()) {
      out_ << "<p class=\"alert warn\" id=\"steps-capped\">Showing the first " << shown << " of " << a_.steps.size()
           << " steps; the summaries cover all of them, and the JSON report lists every step.</p>\n";
    }
    StepTable();
    out_ << "</section>\n";
  }

  // --capture: which steps the GPU side below is over.
  void CaptureNote() {
    if (!a_.capture.in_use()) return;
    const size_t detail = CudaDetailSteps(a_);
    out_ << "<p class=\"note\" id=\"capture\">Capture windows ("
         << E(a_.capture.spec.empty() ? std::string("on demand") : a_.capture.spec) << "): "
         << a_.capture.windows.size() << " window(s); CUDA detail in " << detail << " of " << a_.all_steps << " steps";
    if (GpuSideOverFewerSteps(a_)) {
      out_ << "; the GPU side below (GPU bars, stages, GPU idle, the step table's GPU and CUDA API columns) is over "
              "those "
           << a_.measured_steps << ", wall time and OS costs over all " << a_.all_steps;
    } else if (detail == 0) {
      out_ << "; GPU parts below are empty, not measured";
    }
    out_ << " (every step's wall time: mean " << FormatMsAutoDecimals(a_.all_steps_duration_ns.mean) << " ms).</p>\n";
  }

  void StepTable() {
    const std::vector<StepColumn>& columns = StepColumns();
    // The page's own ms format (as many decimals as comparing needs).
    auto cell = [](const StepColumn& c, double v, bool statistic) {
      return c.is_ms ? FormatMsAutoDecimals(v) : StepCell(c, v, statistic);
    };
    const size_t rows = std::min(a_.steps.size(), opt_.max_step_rows);
    out_ << "<details><summary>Step table (" << rows << " of " << a_.steps.size()
         << " steps; ms; * = warmup)</summary>\n<div class=\"scroll\"><table class=\"sortable\">";
    std::vector<std::string> titles = {"step"};
    for (const StepColumn& c : columns) titles.push_back(c.title);
    out_ << Thead(titles) << "<tbody>";
    for (size_t i = 0; i < rows; ++i) {
      const StepRecord& s = a_.steps[i];
      out_ << "<tr>" << Td(absl::StrCat(s.index, s.warmup ? "*" : ""));
      for (const StepColumn& c : columns) out_ << Td(HasValue(c, s) ? cell(c, c.value(s), /*statistic=*/false) : "-");
      out_ << "</tr>";
    }
    out_ << "</tbody><tfoot>";
    std::vector<DistributionStats> stats;
    for (const StepColumn& c : columns) {
      std::vector<double> values;
      for (const StepRecord& s : a_.steps) {
        if (Measured(s) && InColumnStats(c, s)) values.push_back(c.value(s));
      }
      stats.push_back(Distribution(std::move(values)));
    }
    for (auto [name, field] : {std::pair<const char*, double DistributionStats::*>{"mean", &DistributionStats::mean},
                               {"p50", &DistributionStats::p50},
                               {"p95", &DistributionStats::p95}}) {
      out_ << "<tr>" << Td(name);
      for (size_t c = 0; c < columns.size(); ++c) {
        out_ << Td(stats[c].count ? cell(columns[c], stats[c].*field, /*statistic=*/true) : "-");
      }
      out_ << "</tr>";
    }
    out_ << "</tfoot></table></div>\n<p class=\"note\">data/sync/copy/launch/cuda other/other partition the step "
            "(CPU side); off-CPU overlaps them; GPU kern/comm/copy/idle: the GPU running a compute kernel / only "
            "collectives (NCCL) / only copies / nothing; mean/p50/p95 over the measured steps"
         << (a_.capture.in_use() ? " (for the GPU and CUDA API columns, over those with CUDA detail; '-' in steps "
                                   "without it)"
                                 : "")
         << ".</p></details>\n";
  }

  void StageSection() {
    const StepRecord& t = a_.measured_total;
    out_ << "<section id=\"stages\">\n<h2>Where step time went</h2>\n<p class=\"note\">Each instant of the "
         << a_.measured_steps << (GpuSideOverFewerSteps(a_) ? " measured steps with CUDA detail" : " measured steps")
         << " counted once; every stage but GPU compute and communication is time the GPU ran no "
            "kernel.</p>\n<div class=\"stagebar\">";
    for (size_t i = 0; i < kStageCount; ++i) {
      const double share = Share(t.stages[i], a_.measured_wall_ns);
      if (share <= 0) continue;
      out_ << absl::StrFormat("<div class=\"%s\" style=\"width:%.3f%%\" title=\"%s: %s%%\"></div>", kStageCss[i],
                              share * 100, StageName(static_cast<Stage>(i)), FormatPct1(share));
    }
    out_ << "</div>\n<table class=\"sortable\">"
         << Thead({"<stage", "mean %", "p50 %", "p95 %", "total ms", "ms/step", "% of total"}) << "<tbody>";
    for (size_t i = 0; i < kStageCount; ++i) {
      const DistributionStats& d = a_.stage_share[i];
      out_ << "<tr><td class=\"l\"><i class=\"sw " << kStageCss[i] << "\"></i>" << StageName(static_cast<Stage>(i))
           << "</td>" << Td(FormatPct1(d.mean)) << Td(FormatPct1(d.p50)) << Td(FormatPct1(d.p95))
           << Td(FormatMsAutoDecimals(t.stages[i]))
           << Td(FormatMsAutoDecimals(static_cast<double>(t.stages[i]) / std::max<size_t>(a_.measured_steps, 1)))
           << Td(FormatPct1(Share(t.stages[i], a_.measured_wall_ns))) << "</tr>";
    }
    out_ << "</tbody></table>\n";
    DiskNote();
    out_ << "</section>\n";
  }

  // Where the stages waited for disk, only in traces with such waits.
  void DiskNote() {
    const StageTimes disk = DiskPartOfStages(a_.measured_total);
    std::vector<std::string> parts;
    for (size_t i = 0; i < kStageCount; ++i) {
      if (disk[i] == 0) continue;
      parts.push_back(absl::StrFormat("%s %s ms (%s%% of the stage)", StageName(static_cast<Stage>(i)),
                                      FormatMsAutoDecimals(disk[i]),
                                      FormatPct1(Share(disk[i], a_.measured_total.stages[i]))));
    }
    if (parts.empty()) return;
    out_ << "<p class=\"note\" id=\"stage-disk\">Waiting for disk (the driving thread's own block I/O, or a "
            "thread it waited on blocked on its own): "
         << E(absl::StrJoin(parts, "; ")) << ".</p>\n";
  }

  void IdleSection() {
    const StepRecord& t = a_.measured_total;
    out_ << "<section id=\"gpu-idle\">\n<h2>Why the GPU was idle</h2>\n<p>GPU idle for <b>"
         << FormatMsAutoDecimals(t.gpu.idle_ns) << " ms</b> of " << FormatMsAutoDecimals(a_.measured_wall_ns)
         << " ms of " << (GpuSideOverFewerSteps(a_) ? absl::StrCat(a_.measured_steps, " measured steps with CUDA detail")
                                                       : std::string("measured steps"))
         << " (<b>" << FormatPct1(Share(t.gpu.idle_ns, a_.measured_wall_ns)) << "%</b>), in "
         << t.gpu.idle_stretches << " stretches, the longest " << FormatMsAutoDecimals(t.gpu.longest_idle_ns)
         << " ms. Each idle instant is charged to what the driving thread was doing then; a wait that another "
            "thread of the job ended is charged to the work waited for, and its wakeup chain is shown.</p>\n";
    if (t.gpu.idle_ns == 0) {
      out_ << "<p class=\"note\">The GPU was never idle inside the measured steps.</p></section>\n";
      return;
    }
    std::vector<size_t> order;
    for (size_t i = 0; i < kIdleCauseCount; ++i) {
      if (t.gpu_idle[i]) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return t.gpu_idle[x] > t.gpu_idle[y]; });
    out_ << "<table class=\"sortable idle\">"
         << Thead({"<cause", "ms", "ms/step", "% of idle", "% of step time", "<"}) << "<tbody>";
    for (size_t i : order) {
      const double of_idle = Share(t.gpu_idle[i], t.gpu.idle_ns);
      out_ << "<tr>" << Td(E(IdleCauseName(static_cast<IdleCause>(i))), true) << Td(FormatMsAutoDecimals(t.gpu_idle[i]))
           << Td(FormatMsAutoDecimals(static_cast<double>(t.gpu_idle[i]) / std::max<size_t>(a_.measured_steps, 1)))
           << Td(FormatPct1(of_idle)) << Td(FormatPct1(Share(t.gpu_idle[i], a_.measured_wall_ns)))
           << "<td class=\"barcell\">" << HBar(of_idle, "k-badbar") << "</td></tr>";
    }
    out_ << "</tbody></table>\n";
    if (const std::string drain = SyncDrainText(a_); !drain.empty()) out_ << "<p>" << E(drain) << ".</p>\n";
    if (const std::string drain = AllocationDrainText(a_); !drain.empty()) out_ << "<p>" << E(drain) << ".</p>\n";
    bool any_chain = false;
    for (size_t i : order) {
      const std::string chain = WaitChainText(a_, static_cast<IdleCause>(i));
      if (chain.empty()) continue;
      if (!any_chain) out_ << "<h3>Wakeup chains</h3>\n<ul class=\"chains\">";
      any_chain = true;
      out_ << "<li><b>" << E(IdleCauseName(static_cast<IdleCause>(i))) << "</b>: " << E(chain) << "</li>";
    }
    if (any_chain) out_ << "</ul>\n";
    out_ << "</section>\n";
  }

  // The OS side needs no CUDA detail: over every measured step.
  void OsCostSection() {
    const StepRecord& t = a_.all_steps_total;
    const double n = static_cast<double>(std::max<size_t>(a_.all_steps, 1));
    auto per = [&](double v) { return absl::StrFormat("%.1f", v / n); };
    out_ << "<section id=\"os-costs\">\n<h2>OS costs per measured step</h2>\n";
    if (GpuSideOverFewerSteps(a_)) {
      out_ << "<p class=\"note\" id=\"os-steps\">Over all " << a_.all_steps
           << " measured steps, with CUDA detail or not.</p>\n";
    }
    out_ << "<table>"
         << Thead({"<role", "voluntary switches", "involuntary switches", "run-queue ms"}) << "<tbody>";
    auto row = [&](const std::string& role, const SwitchTotals& s) {
      out_ << "<tr>" << Td(E(role), true) << Td(per(s.voluntary)) << Td(per(s.involuntary))
           << Td(FormatMsAutoDecimals(s.runqueue_ns / n)) << "</tr>";
    };
    row("launching thread", t.os.launching);
    row(WorkerGroupLabel(a_), t.os.workers);
    row("other threads", t.os.others);
    out_ << "</tbody></table>\n<h3>Launching thread</h3>\n<table>"
         << Thead({"page faults", "major", "mmap calls", "mmap MiB", "mmap ms", "munmap calls", "munmap MiB",
                   "munmap ms"})
         << "<tbody><tr>" << Td(per(t.os.page_faults)) << Td(per(t.os.major_faults)) << Td(per(t.os.mmap.calls))
         << Td(FormatMiB1(t.os.mmap.bytes / n)) << Td(FormatMsAutoDecimals(t.os.mmap.ns / n))
         << Td(per(t.os.munmap.calls)) << Td(FormatMiB1(t.os.munmap.bytes / n))
         << Td(FormatMsAutoDecimals(t.os.munmap.ns / n)) << "</tr></tbody></table>\n";
    const OffCpuParts& o = t.off_cpu;
    out_ << "<h3>Launching thread off the CPU, ms per step</h3>\n<table>"
         << Thead(
                {"futex", "page faults", "mmap/munmap", "other syscalls", "unknown", "preempted", "run queue", "total"})
         << "<tbody><tr>" << Td(FormatMsAutoDecimals(o.futex_ns / n)) << Td(FormatMsAutoDecimals(o.page_fault_ns / n))
         << Td(FormatMsAutoDecimals(o.mmap_munmap_ns / n)) << Td(FormatMsAutoDecimals(o.syscall_ns / n))
         << Td(FormatMsAutoDecimals(o.unknown_ns / n)) << Td(FormatMsAutoDecimals(o.preempted_ns / n))
         << Td(FormatMsAutoDecimals(o.runqueue_ns / n)) << Td(FormatMsAutoDecimals(o.total() / n))
         << "</tr></tbody></table>\n";
    BlockIoCosts(t, n);
    out_ << "</section>\n";
  }

  // Block I/O per step by role, only where the trace has any.
  void BlockIoCosts(const StepRecord& t, double n) {
    const StepOsCosts& os = t.os;
    if (os.block_io_launching.requests + os.block_io_workers.requests + os.block_io_others.requests == 0 &&
        t.off_cpu.disk_ns == 0) {
      return;
    }
    out_ << "<h3>Block I/O issued per step</h3>\n<table id=\"step-block-io\">"
         << Thead({"<role", "requests", "MiB", "issue to completion ms"}) << "<tbody>";
    auto row = [&](const char* role, const BlockIoCounts& b) {
      out_ << "<tr>" << Td(role, true) << Td(absl::StrFormat("%.1f", b.requests / n)) << Td(FormatMiB1(b.bytes / n))
           << Td(FormatMsAutoDecimals(b.ns / n)) << "</tr>";
    };
    row("launching thread", os.block_io_launching);
    row("data workers", os.block_io_workers);
    row("other threads", os.block_io_others);
    out_ << "</tbody></table>\n<p class=\"note\">The launching thread was blocked on its own block I/O (waiting "
            "for disk) "
         << FormatMsAutoDecimals(t.off_cpu.disk_ns / n) << " ms per step.</p>\n";
  }

  const OsSummary& os_;
  const CudaSummary& cuda_;
  const StepAnalysis& a_;
  const Diagnosis& d_;
  const HtmlReportOptions& opt_;
  const RankAnalysis* ranks_;
  std::ostream& out_;
};

}  // namespace

void WriteHtmlReport(const TraceSummary& summary, const StepAnalysis& steps, const Diagnosis& diagnosis,
                     std::ostream& out, const HtmlReportOptions& options, const RankAnalysis* ranks) {
  HtmlReport(summary, steps, diagnosis, options, ranks, out).Write();
}

absl::Status WriteHtmlReportFile(const std::string& path, const TraceSummary& summary, const StepAnalysis& steps,
                                 const Diagnosis& diagnosis, const HtmlReportOptions& options,
                                 const RankAnalysis* ranks) {
  errno = 0;
  std::ofstream file(path, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!file) {
    const int err = errno ? errno : EIO;
    return absl::Status(absl::ErrnoToStatusCode(err), absl::StrFormat("cannot create %s: %s", path, strerror(err)));
  }
  WriteHtmlReport(summary, steps, diagnosis, file, options, ranks);
  file.close();
  if (!file) {
    const int err = errno ? errno : EIO;
    return absl::Status(absl::ErrnoToStatusCode(err), absl::StrFormat("writing %s failed: %s", path, strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace gpuos
