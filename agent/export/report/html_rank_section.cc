// The ranks' or training processes' table as HTML; see html_rank_section.h.
#include "export/report/html_rank_section.h"

#include <optional>
#include <string>
#include <vector>

#include "export/report/html_blocks.h"
#include "export/report/rank_report.h"

namespace gpuos {

void WriteHtmlRankSection(const RankAnalysis& ranks, uint32_t report_pid, std::ostream& out) {
  const std::optional<UnitTableView> view = RankTableView(ranks, report_pid);
  if (!view) return;
  std::vector<std::string> titles;
  for (const TextTable::Column& c : view->columns) {
    titles.push_back((c.align == TextTable::Align::kLeft ? "<" : "") + HtmlEscape(c.title));
  }
  out << "<section id=\"ranks\">\n<h2>" << HtmlEscape(view->heading) << "</h2>\n<p class=\"note\">"
      << HtmlEscape(view->legend) << "</p>\n<div class=\"scroll\"><table class=\"sortable\" id=\"rank-table\">"
      << html::Thead(titles) << "<tbody>";
  for (const std::vector<std::string>& row : view->rows) {
    out << "<tr>";
    for (size_t i = 0; i < row.size() && i < view->columns.size(); ++i) {
      out << html::Td(HtmlEscape(row[i]), view->columns[i].align == TextTable::Align::kLeft);
    }
    out << "</tr>";
  }
  out << "</tbody></table></div>\n";
  for (const std::string& note : view->notes) out << "<p class=\"note\">" << HtmlEscape(note) << "</p>\n";
  out << "</section>\n";
}

}  // namespace gpuos
