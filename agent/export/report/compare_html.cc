// The comparison page; see report/compare_html.h.  Stage colours are the report
// page's (report/html_report.cc), so a stage looks the same on both.
#include "export/report/compare_html.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_format.h"
#include "export/report/compare_report.h"
#include "export/report/html_blocks.h"

namespace gpuos {
namespace {

const char* const kStageColour[] = {"#f28e2b", "#b07aa1", "#4e79a7", "#59a14f", "#86bcb6", "#e15759", "#bab0ac"};
static_assert(std::size(kStageColour) == kStageCount);

constexpr char kStyle[] =
    "body{font:14px/1.45 system-ui,sans-serif;color:#1d2330;background:#f4f6f9;margin:0;padding:20px}"
    "section{background:#fff;border-radius:8px;padding:14px 18px;margin:0 0 16px;box-shadow:0 1px 2px #0001}"
    "h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:0 0 10px}"
    "code{background:#eef1f5;padding:2px 6px;border-radius:4px;overflow-wrap:anywhere}"
    ".bars{display:flex;gap:18px;align-items:flex-end;height:260px;padding:0 4px;border-bottom:1px solid #9aa3b2}"
    ".col{display:flex;flex-direction:column;align-items:center;width:90px;height:100%;justify-content:flex-end}"
    ".stack{width:56px;display:flex;flex-direction:column-reverse}"
    ".stack div{width:100%}.val{font-size:12px;color:#5d6778;margin-bottom:3px}"
    ".names{display:flex;gap:18px;padding:4px}.names div{width:90px;text-align:center;font-size:12px;"
    "overflow-wrap:anywhere}"
    ".legend span{display:inline-block;margin-right:14px;font-size:12px}"
    ".legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}"
    "table{border-collapse:collapse;font-size:13px}th,td{padding:3px 10px;border-bottom:1px solid #dde2ea;"
    "text-align:right;white-space:nowrap}th{background:#f0f3f7}td:first-child{text-align:left}"
    "tr.rule td{border-bottom:2px solid #9aa3b2;padding:0}.failed{color:#c0392b}";

}  // namespace

void WriteCompareHtml(const Comparison& c, std::ostream& out) {
  out << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>gpuos-trace compare</title><style>" << kStyle
      << "</style></head><body><h1>gpuos-trace compare: " << c.runs.size() << " runs</h1>";

  out << "<section><h2>Runs</h2><ul>";
  for (const RunFacts& r : c.runs) {
    out << "<li><b>" << HtmlEscape(r.name) << "</b>: " << HtmlEscape(r.path);
    if (!r.argv.empty()) out << " <code>" << HtmlEscape(RunCommandText(r)) << "</code>";
    if (!r.failed.empty()) out << " <span class=\"failed\">" << HtmlEscape(r.failed) << "</span>";
    if (!r.warning.empty()) out << " <span class=\"failed\">WARNING: " << HtmlEscape(r.warning) << "</span>";
    out << "</li>";
  }
  out << "</ul></section>";

  // One scale for every bar: the longest mean step fills the height.
  double longest = 0;
  for (const RunFacts& r : c.runs) longest = std::max(longest, r.failed.empty() ? r.step_mean_ns : 0.0);
  out << "<section><h2>Mean step by stage</h2><div class=\"bars\">";
  for (const RunFacts& r : c.runs) {
    out << "<div class=\"col\">";
    if (!r.failed.empty() || r.step_mean_ns <= 0 || longest <= 0) {
      out << "<div class=\"val failed\">" << HtmlEscape(r.failed.empty() ? "no steps" : r.failed) << "</div>";
    } else {
      out << absl::StrFormat("<div class=\"val\">%.3f ms</div>", r.step_mean_ns / 1e6);
      out << absl::StrFormat("<div class=\"stack\" style=\"height:%.2f%%\">", 100.0 * r.step_mean_ns / longest);
      for (size_t s = 0; s < kStageCount; ++s) {
        if (r.stage_pct[s] <= 0) continue;
        out << absl::StrFormat("<div style=\"height:%.3f%%;background:%s\" title=\"%s: %.1f%% (%.3f ms)\"></div>",
                               r.stage_pct[s], kStageColour[s], StageName(static_cast<Stage>(s)), r.stage_pct[s],
                               r.stage_ns[s] / 1e6);
      }
      out << "</div>";
    }
    out << "</div>";
  }
  out << "</div><div class=\"names\">";
  for (const RunFacts& r : c.runs) out << "<div>" << HtmlEscape(r.name) << "</div>";
  out << "</div><p class=\"legend\">";
  for (size_t s = 0; s < kStageCount; ++s) {
    out << "<span><i style=\"background:" << kStageColour[s] << "\"></i>" << StageName(static_cast<Stage>(s))
        << "</span>";
  }
  out << "</p></section>";

  out << "<section><h2>Side by side</h2><table><tr><th></th>";
  for (const RunFacts& r : c.runs) out << "<th>" << HtmlEscape(r.name) << "</th>";
  out << "</tr>";
  for (const CompareRow& row : CompareTableRows(c)) {
    if (row.rule) {
      out << "<tr class=\"rule\"><td colspan=\"" << c.runs.size() + 1 << "\"></td></tr>";
      continue;
    }
    out << "<tr>";
    for (const std::string& cell : row.cells) out << "<td>" << HtmlEscape(cell) << "</td>";
    out << "</tr>";
  }
  out << "</table><p>" << HtmlEscape(kWholeTraceNote) << "</p></section>";

  if (!c.deltas.empty()) {
    out << "<section><h2>What changed the step</h2><ul>";
    for (const RunDelta& d : c.deltas) out << "<li>" << HtmlEscape(d.line) << "</li>";
    out << "</ul></section>";
  }
  if (c.knee) {
    out << absl::StrFormat("<section><h2>Knee (threshold %.0f%%): ", c.knee->threshold * 100)
        << HtmlEscape(c.knee->found ? c.knee->at : "none") << "</h2><p>" << HtmlEscape(c.knee->note) << "</p><ul>";
    for (const Knee::Growth& g : c.knee->grew) {
      out << "<li>grew: " << HtmlEscape(g.what) << absl::StrFormat(" %.2f &rarr; %.2f", g.at_knee, g.at_last)
          << "</li>";
    }
    out << "</ul></section>";
  }
  out << "<section><h2>Diagnosis</h2><ul>";
  for (const RunFacts& r : c.runs) {
    out << "<li><b>" << HtmlEscape(r.name) << "</b>: " << HtmlEscape(r.failed.empty() ? r.headline : r.failed)
        << "</li>";
  }
  out << "</ul></section></body></html>\n";
}

absl::Status WriteCompareHtmlFile(const std::string& path, const Comparison& comparison) {
  errno = 0;
  std::ofstream file(path, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!file) {
    const int err = errno ? errno : EIO;
    return absl::Status(absl::ErrnoToStatusCode(err), absl::StrFormat("cannot create %s: %s", path, strerror(err)));
  }
  WriteCompareHtml(comparison, file);
  file.close();
  if (!file) {
    const int err = errno ? errno : EIO;
    return absl::Status(absl::ErrnoToStatusCode(err), absl::StrFormat("writing %s failed: %s", path, strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace gpuos
