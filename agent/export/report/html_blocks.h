// Small HTML pieces the report pages share (the run report, the comparison):
// escaping, table cells and heads, bars and headline numbers.  Every string
// from a trace goes through HtmlEscape before it reaches a page.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpuos {

// `text` with &, <, >, " and ' replaced by entities, after Printable() has
// made control characters and malformed UTF-8 visible as \xNN.
std::string HtmlEscape(std::string_view text);

namespace html {

// A table cell; numbers right-aligned, text left-aligned.  `escaped` is
// already HTML.
std::string Td(const std::string& escaped, bool left = false);
// A left-aligned cell for a name from the trace (escaped here), cut short by
// the style sheet, whole on hover.
std::string NameTd(std::string_view name);
// A table head: titles are ours, not the trace's; a leading '<' marks a
// left-aligned column.
std::string Thead(const std::vector<std::string>& titles);
// A horizontal bar `share` (0..1, clamped) of its cell wide, coloured by the
// style sheet's class `css`.
std::string HBar(double share, const char* css);
// A headline number with its label under it.
std::string Stat(const std::string& value, const std::string& label);

}  // namespace html
}  // namespace gpuos
