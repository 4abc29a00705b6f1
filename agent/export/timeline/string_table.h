// Every distinct name the exporter draws (kernel, CUDA API, NVTX and syscall
// names...) stored once and referred to by a small id.  Records carry the id,
// so they stay fixed-size; the Perfetto writer reuses it as the name's
// interning id.  Memory grows with the number of distinct names, not events.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace gpuos {

class StringTable {
 public:
  // Returns the id of `text`, adding it on first sight.  Ids are dense,
  // starting at 0.
  uint32_t Intern(std::string_view text);
  std::string_view Get(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  // A deque never moves its elements, so the map's keys stay valid.
  std::deque<std::string> strings_;
  absl::flat_hash_map<std::string_view, uint32_t> ids_;
};

}  // namespace gpuos
