// A plain-text table for terminal reports: columns sized to their widest
// cell, numbers right-aligned, optional rule lines between groups of rows.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace gpuos {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string title;
    Align align = Align::kRight;
  };

  explicit TextTable(std::vector<Column> columns);

  // Cells beyond the number of columns are dropped; missing ones are blank.
  void AddRow(std::vector<std::string> cells);
  // A dashed line across the table, e.g. between processes.
  void AddRule();
  size_t rows() const { return rows_.size(); }

  // Writes the title line, a rule, then the rows, each line prefixed with
  // `indent`.  Trailing blanks are trimmed.
  void Render(std::ostream& out, std::string_view indent = "") const;

 private:
  std::vector<Column> columns_;
  // An empty vector stands for a rule.
  std::vector<std::vector<std::string>> rows_;
};

// Terminal width of `text`: UTF-8 code points (wide characters count 1).
size_t DisplayWidth(std::string_view text);

// `bytes` made safe to print in a table: control characters, DEL and bytes
// that are not well-formed UTF-8 become \xNN, so a hostile comm name cannot
// move the cursor or break the alignment.
std::string Printable(std::string_view bytes);

}  // namespace gpuos
