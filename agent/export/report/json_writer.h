// A small streaming JSON writer for reports: pretty-printed with a 2-space
// indent, numbers as JSON numbers, and strings that are always valid UTF-8
// (trace strings such as comm names can hold any bytes).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace gpuos {

// Escapes `bytes` as the contents of a JSON string (without the quotes).
// Control characters become \n, \t, ... or \u00XX; each byte that is not
// part of a well-formed UTF-8 sequence becomes U+FFFD.
std::string JsonEscape(std::string_view bytes);

// Writes one JSON value to `out` as calls arrive, so a large report never
// sits in memory twice.  Misuse (a value without a key inside an object, an
// unbalanced End) is a programming error; the writer does not guard it.
class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // Inside an object: the name of the next value.
  void Key(std::string_view name);

  void String(std::string_view value);
  void Uint(uint64_t value);
  void Int(int64_t value);
  // Non-finite values (which JSON cannot express) are written as null.
  void Double(double value);
  void Bool(bool value);
  void Null();

  // Key + value in one call, for the common case.
  void Field(std::string_view name, std::string_view value) {
    Key(name);
    String(value);
  }
  void Field(std::string_view name, const char* value) {
    Key(name);
    String(value);
  }
  void Field(std::string_view name, uint64_t value) {
    Key(name);
    Uint(value);
  }
  void Field(std::string_view name, uint32_t value) {
    Key(name);
    Uint(value);
  }
  void Field(std::string_view name, int64_t value) {
    Key(name);
    Int(value);
  }
  void Field(std::string_view name, int32_t value) {
    Key(name);
    Int(value);
  }
  void Field(std::string_view name, double value) {
    Key(name);
    Double(value);
  }
  void Field(std::string_view name, bool value) {
    Key(name);
    Bool(value);
  }

 private:
  struct Level {
    bool is_object;
    bool empty = true;
  };
  // Writes the comma, newline and indent that precede a value or a key.
  void BeforeValue();
  void Indent();

  std::ostream& out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

}  // namespace gpuos
