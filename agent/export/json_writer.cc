// JSON writing for reports; see json_writer.h.
#include "export/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gpuos {
namespace {

constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Length of the well-formed UTF-8 sequence starting at bytes[i] (Unicode
// table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF), or 0
// when the byte there does not start one.
size_t Utf8SequenceLength(std::string_view bytes, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char b0 = at(i);
  const size_t left = bytes.size() - i;
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < left && at(i + k) >= lo && at(i + k) <= hi;
  };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2) ? 3 : 0;
  if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (b0 == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (b0 == 0xF0) return cont(1, 0x90, 0xBF) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

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
