// Cached regex matching of names; see step_name_matcher.h.
#include "analysis/step_name_matcher.h"

#include <cctype>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpuos {

absl::StatusOr<StepNameMatcher> StepNameMatcher::Create(const std::string& pattern, std::string_view what) {
  try {
    std::regex regex(pattern, std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
    return StepNameMatcher(pattern, std::move(regex));
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), ": \"", pattern, "\" is not a valid regular expression (", e.what(), ")"));
  }
}

bool StepNameMatcher::Matches(const std::string& name) {
  auto it = cache_.find(name);
  if (it != cache_.end()) return it->second;
  // A trace holds few distinct names; a hostile one with a million distinct
  // names only costs a regex match each once the cache stops growing.
  const bool match = std::regex_match(name, regex_);
  if (cache_.size() < 65536) cache_.emplace(name, match);
  return match;
}

int64_t TrailingNumber(std::string_view name) {
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.remove_suffix(1);
  size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[name.size() - 1 - digits]))) {
    ++digits;
  }
  if (digits == 0) return -1;
  uint64_t value = 0;
  if (!absl::SimpleAtoi(absl::string_view(name.data() + name.size() - digits, digits), &value) || value > INT64_MAX) return -1;
  return static_cast<int64_t>(value);
}

}  // namespace gpuos
