// HTML pieces of the report pages; see report/html_blocks.h.
#include "export/report/html_blocks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "export/report/text_table.h"

namespace gpuos {

std::string HtmlEscape(std::string_view text) {
  const std::string printable = Printable(text);
  std::string out;
  out.reserve(printable.size());
  for (char c : printable) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace html {

std::string Td(const std::string& escaped, bool left) {
  return absl::StrCat(left ? "<td class=\"l\">" : "<td>", escaped, "</td>");
}
std::string NameTd(std::string_view name) {
  const std::string e = HtmlEscape(name);
  return absl::StrCat("<td class=\"l name\" title=\"", e, "\">", e, "</td>");
}
std::string Thead(const std::vector<std::string>& titles) {
  std::string h = "<thead><tr>";
  for (const std::string& t : titles) {
    if (!t.empty() && t[0] == '<') {
      absl::StrAppend(&h, "<th class=\"l\">", t.substr(1), "</th>");
    } else {
      absl::StrAppend(&h, "<th>", t, "</th>");
    }
  }
  return h + "</tr></thead>";
}
std::string HBar(double share, const char* css) {
  return absl::StrFormat("<span class=\"hbar %s\" style=\"width:%.1f%%\"></span>", css,
                         std::clamp(share, 0.0, 1.0) * 100);
}
std::string Stat(const std::string& value, const std::string& label) {
  return absl::StrCat("<div class=\"stat\"><b>", value, "</b><span>", label, "</span></div>");
}

}  // namespace html
}  // namespace gpuos
