// The debug annotations a kind's Describe (pass 2, timeline/record_kinds.h)
// puts on one slice or instant, with what describing needs: the trace
// header and the names.  Reused from record to record without allocating;
// what it holds is valid until the next Clear.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "export/timeline/string_table.h"
#include "export/timeline/timeline_sink.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class ArgList {
 public:
  ArgList(const v1::TraceHeader& header, const StringTable& strings);

  const v1::TraceHeader& header() const { return header_; }
  std::string_view Name(uint32_t id) const { return strings_.Get(id); }

  void Clear();
  void Int(const char* key, int64_t value);
  void Uint(const char* key, uint64_t value);
  void Pointer(const char* key, uint64_t value);
  void Bool(const char* key, bool value);
  // `value` must outlive the record's description (a literal, a name of
  // the StringTable or a Scratch string).
  void String(const char* key, std::string_view value);
  // A string for String's value, valid until the next Clear.
  std::string& Scratch();

  absl::Span<const DebugArg> args() const { return args_; }

 private:
  DebugArg& Add(const char* key, DebugArg::Type type);

  const v1::TraceHeader& header_;
  const StringTable& strings_;
  std::vector<DebugArg> args_;
  // Kept for their capacity; a deque, as growing it leaves the strings in
  // place (args may point into them).
  std::deque<std::string> scratch_;
  size_t scratch_used_ = 0;
};

}  // namespace gpuos
