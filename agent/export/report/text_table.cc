// Aligned plain-text tables; see report/text_table.h.
#include "export/report/text_table.h"

#include "export/report/utf8.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gpuos {
size_t DisplayWidth(std::string_view text) {
  size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;  // count lead bytes only
  }
  return width;
}

std::string Printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    const size_t n = Utf8SequenceLength(bytes, i);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      out += absl::StrFormat("\\x%02x", c);
      ++i;
    } else {
      out.append(bytes.data() + i, n);
      i += n;
    }
  }
  return out;
}

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  // A row of nothing but blanks must not read as a rule.
  if (cells.empty()) return;
  rows_.push_back(std::move(cells));
}

void TextTable::AddRule() { rows_.emplace_back(); }

void TextTable::Render(std::ostream& out, std::string_view indent) const {
  std::vector<size_t> widths(columns_.size(), 0);
  for (size_t c = 0; c < columns_.size(); ++c) widths[c] = DisplayWidth(columns_[c].title);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  size_t total = 0;
  for (size_t c = 0; c < widths.size(); ++c) total += widths[c] + (c ? 2 : 0);

  auto line = [&](const std::vector<std::string>& cells) {
    std::string text(indent);
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c) text += "  ";
      const std::string& cell = cells[c];
      const std::string pad(widths[c] - DisplayWidth(cell), ' ');
      if (columns_[c].align == Align::kRight) {
        text += pad;
        text += cell;
      } else {
        text += cell;
        text += pad;
      }
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << '\n';
  };
  auto rule = [&] { out << indent << std::string(total, '-') << '\n'; };

  std::vector<std::string> titles;
  for (const auto& column : columns_) titles.push_back(column.title);
  line(titles);
  rule();
  for (const auto& row : rows_) {
    if (row.empty()) {
      rule();
    } else {
      line(row);
    }
  }
}

}  // namespace gpuos
