// The report page's step charts; see report/html_step_chart.h.
#include "export/report/html_step_chart.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "export/report/format.h"

namespace gpuos::html {
namespace {

// The chart's size and margins, in SVG units.
constexpr double kW = 1200, kH = 250, kL = 58, kR = 10, kT = 12, kB = 30;
constexpr double kPlotW = kW - kL - kR, kPlotH = kH - kT - kB;

// 1, 2 or 5 times a power of ten, so that `max` spans about `target` ticks.
double NiceStep(double max, int target) {
  if (max <= 0) return 1;
  const double raw = max / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

std::string TickLabel(double ms, double step_ms) {
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step_ms) - 1e-9)), 0, 6);
  return absl::StrFormat("%.*f", decimals, ms);
}

// The vertical scale: ticks every `step_ms`, the top at `top_ns`.
struct ChartScale {
  double step_ms = 0;
  double top_ms = 0;
  double top_ns = 0;
  double y_of(double ns) const { return kT + kPlotH * (1 - std::min(ns, top_ns) / top_ns); }
};

bool Measured(const StepAnalysis& a, const StepRecord& s) { return !s.warmup || a.summary_includes_warmup; }

ChartScale ScaleFor(const StepAnalysis& a, size_t shown) {
  double measured_max = 0, all_max = 0;
  for (size_t i = 0; i < shown; ++i) {
    const double d = static_cast<double>(a.steps[i].duration_ns());
    all_max = std::max(all_max, d);
    if (Measured(a, a.steps[i])) measured_max = std::max(measured_max, d);
  }
  double scale = measured_max > 0 ? measured_max : all_max;
  // A few spikes among many steps would squash every other bar to a
  // sliver: cut them off instead (marked, and their numbers on hover).
  // (Wall time needs no CUDA detail: the statistics over every measured step.)
  const DistributionStats& wall = a.all_steps_duration_ns;
  if (a.all_steps >= 20 && wall.p95 > 0 && scale > 4 * wall.p95) scale = 2 * wall.p95;
  if (all_max <= 1.25 * scale) scale = all_max;
  ChartScale c;
  c.step_ms = NiceStep(scale / 1e6, 5);
  c.top_ms = std::ceil(scale / 1e6 / c.step_ms - 1e-9) * c.step_ms;
  if (c.top_ms <= 0) c.top_ms = c.step_ms;
  c.top_ns = c.top_ms * 1e6;
  return c;
}

void AppendGrid(const ChartScale& c, std::string& svg) {
  for (double v = 0; v <= c.top_ms + c.step_ms * 1e-6; v += c.step_ms) {
    const double y = c.y_of(v * 1e6);
    absl::StrAppendFormat(&svg, "<line class=\"grid\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\"/>", kL,
                          kW - kR, y, y);
    absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", kL - 6, y + 4,
                          TickLabel(v, c.step_ms));
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">ms "
                        "per step</text>",
                        kT + kPlotH / 2, kT + kPlotH / 2);
}

// The hover text of one step's bar.
std::string BarTitle(const StepRecord& s, const char* kind, const std::vector<BarPart>& parts) {
  const double dur = static_cast<double>(s.duration_ns());
  std::string title = absl::StrFormat("step %d%s: %s ms", s.index,
                                      !s.left_out.empty() ? absl::StrCat(" (left out: ", s.left_out, ")")
                                      : s.warmup          ? " (warmup)"
                                                          : "",
                                      FormatMsAutoDecimals(dur));
  for (const BarPart& p : parts) {
    const uint64_t ns = p.ns(s);
    if (ns)
      absl::StrAppend(&title, "\n", p.label, ": ", FormatMsAutoDecimals(ns), " ms (", FormatPct1(Share(ns, dur)),
                      "%)");
  }
  if (std::string(kind) == "cpu" && s.off_cpu.total()) {
    absl::StrAppend(&title, "\noff the CPU (overlaps the parts): ", FormatMsAutoDecimals(s.off_cpu.total()), " ms");
  }
  if (std::string(kind) == "gpu") absl::StrAppend(&title, "\nkernels started: ", s.gpu.kernels_started);
  return title;
}

// One step's stacked bar at `x`, `bar_w` wide.  Returns whether it was cut
// off at the top.
bool AppendBar(const StepRecord& s, const char* kind, const std::vector<BarPart>& parts, const ChartScale& c,
               double x, double bar_w, std::string& svg) {
  // A step outside the capture windows has no GPU records: its GPU bar is
  // left empty rather than drawn as all idle.
  const bool no_detail = std::string(kind) == "gpu" && !s.cuda_detail;
  std::string title = no_detail ? absl::StrFormat("step %d: %s ms\nno CUDA detail (outside the capture windows)",
                                                  s.index, FormatMsAutoDecimals(s.duration_ns()))
                                : BarTitle(s, kind, parts);
  const bool cut = static_cast<double>(s.duration_ns()) > c.top_ns;
  if (cut) title += "\n(taller than the chart: cut off at the top)";
  absl::StrAppendFormat(&svg, "<g class=\"step-bar %s%s%s\" data-step=\"%d\"><title>%s</title>", kind,
                        s.warmup ? " warmup" : "", no_detail ? " no-detail" : "", s.index, title);
  double base = 0;
  for (const BarPart& p : parts) {
    if (no_detail) break;
    const double ns = static_cast<double>(p.ns(s));
    if (ns <= 0) continue;
    const double y0 = c.y_of(base), y1 = c.y_of(base + ns);
    base += ns;
    if (y0 - y1 <= 0) continue;
    absl::StrAppendFormat(&svg, "<rect class=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.2f\"/>", p.css,
                          x, y1, bar_w, y0 - y1);
  }
  if (cut) {
    absl::StrAppendFormat(&svg, "<path class=\"clip\" d=\"M%.2f %.1fl%.2f -7l%.2f 7z\"/>", x, kT,
                          std::max(bar_w / 2, 3.0), std::max(bar_w / 2, 3.0));
  }
  svg += "</g>";
  return cut;
}

void AppendMeanAndAxis(const StepAnalysis& a, const ChartScale& c, std::string& svg) {
  if (a.all_steps) {
    const double y = c.y_of(a.all_steps_duration_ns.mean);
    absl::StrAppendFormat(&svg, "<line class=\"mean\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\"/>", kL,
                          kW - kR, y, y);
    absl::StrAppendFormat(&svg,
                          "<text class=\"meanlabel\" x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">mean %s ms</text>",
                          kW - kR - 2, y - 4, FormatMsAutoDecimals(a.all_steps_duration_ns.mean));
  }
  absl::StrAppendFormat(&svg, "<line class=\"axis\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\"/>", kL, kW - kR,
                        kT + kPlotH, kT + kPlotH);
  absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>", kL + kPlotW / 2,
                        kH - 2);
}

}  // namespace

std::vector<BarPart> CpuParts() {
  return {
      {"data wait", "k-data", [](const StepRecord& s) { return s.cpu.data_wait_ns; }},
      {"sync", "k-sync", [](const StepRecord& s) { return s.cpu.sync_ns; }},
      {"copy (cudaMemcpy)", "k-copy", [](const StepRecord& s) { return s.cpu.copy_api_ns; }},
      {"launch", "k-launch", [](const StepRecord& s) { return s.cpu.launch_api_ns; }},
      {"other CUDA API", "k-cuda", [](const StepRecord& s) { return s.cpu.other_cuda_api_ns; }},
      {"other (Python, framework, OS)", "k-other", [](const StepRecord& s) { return s.cpu.other_ns; }},
  };
}

std::vector<BarPart> GpuParts() {
  return {
      {"kernel running", "k-kern", [](const StepRecord& s) { return s.gpu.kernel_busy_ns; }},
      {"collective only (NCCL)", "k-comm", [](const StepRecord& s) { return s.gpu.comm_only_ns; }},
      {"copy only", "k-gcopy", [](const StepRecord& s) { return s.gpu.copy_only_ns; }},
      {"memset only", "k-memset", [](const StepRecord& s) { return s.gpu.memset_only_ns; }},
      {"idle", "k-idle", [](const StepRecord& s) { return s.gpu.idle_ns; }},
  };
}

void WriteLegend(const std::vector<BarPart>& parts, bool with_warmup, std::ostream& out) {
  out << "<div class=\"legend\">";
  for (const BarPart& p : parts) out << "<span><i class=\"sw " << p.css << "\"></i>" << p.label << "</span>";
  if (with_warmup) out << "<span><i class=\"sw k-other\" style=\"opacity:.38\"></i>faded: warmup step</span>";
  out << "</div>\n";
}

size_t WriteStepChart(const StepAnalysis& a, const char* kind, const std::vector<BarPart>& parts, size_t shown,
                      std::ostream& out) {
  const ChartScale c = ScaleFor(a, shown);
  std::string svg = absl::StrFormat(
      "<svg class=\"chart %s\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">", kind, kW, kH,
      std::string(kind) == "cpu" ? "launching thread's time per step" : "GPU time per step");
  AppendGrid(c, svg);
  const double pitch = kPlotW / std::max<size_t>(shown, 1);
  // Narrow bars overlap a little, so anti-aliased edges do not wash them out.
  const double bar_w = shown <= 400 ? std::min(pitch * 0.78, 46.0) : pitch + 0.35;
  const size_t label_every = std::max<size_t>(1, static_cast<size_t>(NiceStep(shown, 12)));
  // Round step numbers on the axis when the steps are numbered 0, 1, 2...
  // or 1, 2, 3...; else every label_every-th bar.
  bool contiguous = true;
  for (size_t i = 1; i < shown && contiguous; ++i) contiguous = a.steps[i].index == a.steps[i - 1].index + 1;
  size_t clipped = 0;
  for (size_t i = 0; i < shown; ++i) {
    const StepRecord& s = a.steps[i];
    const double x = kL + i * pitch + (pitch - bar_w) / 2;
    if (AppendBar(s, kind, parts, c, x, bar_w, svg)) ++clipped;
    if (contiguous ? s.index % label_every == 0 : i % label_every == 0) {
      absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>", x + bar_w / 2,
                            kH - kB + 14, s.index);
    }
  }
  AppendMeanAndAxis(a, c, svg);
  svg += "</svg>\n";
  out << svg;
  return clipped;
}

}  // namespace gpuos::html
