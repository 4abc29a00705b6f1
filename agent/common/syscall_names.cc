#include "common/syscall_names.h"

namespace gpuos {

const std::map<int32_t, std::string>& SyscallNameTable() {
  static const auto* table = new std::map<int32_t, std::string>{
#include "syscall_names.inc"
  };
  return *table;
}

int32_t SyscallNumber(const std::string& name) {
  for (const auto& [nr, n] : SyscallNameTable()) {
    if (n == name) return nr;
  }
  return -1;
}

}  // namespace gpuos
