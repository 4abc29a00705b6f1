// A compiled, case-insensitive whole-name regex with a per-name cache: NVTX
// range names and comm names repeat thousands of times in a trace, and
// std::regex is slow enough that matching each occurrence would dominate
// the report's run time.
#pragma once

#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace gpuos {

class StepNameMatcher {
 public:
  // `what` names the option in the error ("--step-regex").
  static absl::StatusOr<StepNameMatcher> Create(const std::string& pattern, std::string_view what);

  bool Matches(const std::string& name);
  const std::string& pattern() const { return pattern_; }

 private:
  StepNameMatcher(std::string pattern, std::regex regex) : pattern_(std::move(pattern)), regex_(std::move(regex)) {}
  std::string pattern_;
  std::regex regex_;
  absl::flat_hash_map<std::string, bool> cache_;
};

// The decimal number at the end of `name` ("step 12" -> 12, "ProfilerStep#5"
// -> 5), or -1 when there is none or it does not fit.
int64_t TrailingNumber(std::string_view name);

}  // namespace gpuos
