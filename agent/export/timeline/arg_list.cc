// ArgList: see timeline/arg_list.h.
#include "export/timeline/arg_list.h"

namespace gpuos {

ArgList::ArgList(const v1::TraceHeader& header, const StringTable& strings)
    : header_(header), strings_(strings) {
  args_.reserve(16);
}

void ArgList::Clear() {
  args_.clear();
  scratch_used_ = 0;
}

DebugArg& ArgList::Add(const char* key, DebugArg::Type type) {
  DebugArg& arg = args_.emplace_back();
  arg.key = key;
  arg.type = type;
  return arg;
}

void ArgList::Int(const char* key, int64_t value) { Add(key, DebugArg::Type::kInt).int_value = value; }
void ArgList::Uint(const char* key, uint64_t value) { Add(key, DebugArg::Type::kUint).uint_value = value; }
void ArgList::Pointer(const char* key, uint64_t value) {
  Add(key, DebugArg::Type::kPointer).uint_value = value;
}
void ArgList::Bool(const char* key, bool value) { Add(key, DebugArg::Type::kBool).bool_value = value; }
void ArgList::String(const char* key, std::string_view value) {
  Add(key, DebugArg::Type::kString).string_value = value;
}

std::string& ArgList::Scratch() {
  if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
  std::string& text = scratch_[scratch_used_++];
  text.clear();
  return text;
}

}  // namespace gpuos
