// StringTable: see timeline/string_table.h.
#include "export/timeline/string_table.h"

namespace gpuos {

uint32_t StringTable::Intern(std::string_view text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(text);
  ids_.emplace(strings_.back(), id);
  return id;
}

}  // namespace gpuos
