// JSON writing for reports; see report/json_writer.h.
#include "export/report/json_writer.h"

#include "export/report/utf8.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gpuos {
namespace {

constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

}  // namespace

std::string JsonEscape(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 2);
  size_t i = 0;
  while (i < bytes.size()) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(bytes, i);
      if (n == 0) {
        out += kReplacementChar;
        ++i;
      } else {
        out.append(bytes.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        // DEL is legal JSON but invisible in a terminal; escape it too.
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out;
}

void JsonWriter::Indent() {
  out_ << '\n';
  for (size_t i = 0; i < stack_.size(); ++i) out_ << "  ";
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) return;
  Level& level = stack_.back();
  if (!level.empty) out_ << ',';
  level.empty = false;
  Indent();
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_ << '{';
  stack_.push_back(Level{true});
}

void JsonWriter::EndObject() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) Indent();
  out_ << '}';
  if (stack_.empty()) out_ << '\n';
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_ << '[';
  stack_.push_back(Level{false});
}

void JsonWriter::EndArray() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) Indent();
  out_ << ']';
  if (stack_.empty()) out_ << '\n';
}

void JsonWriter::Key(std::string_view name) {
  BeforeValue();
  out_ << '"' << JsonEscape(name) << "\": ";
  after_key_ = true;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ << '"' << JsonEscape(value) << '"';
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  out_ << value;
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ << value;
}

void JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ << "null";
    return;
  }
  // The shortest of %.15g / %.17g that reads back as the same double, so
  // 0.1 prints as 0.1; %g output ("1e+20", "0.5", "-3") is valid JSON.
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", value);
  if (std::strtod(buf, nullptr) != value) std::snprintf(buf, sizeof(buf), "%.17g", value);
  out_ << buf;
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ << (value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_ << "null";
}

}  // namespace gpuos
