// Syscall numbers to names for the architecture gpuos-trace was built for
// (generated from the kernel's uapi unistd header).  Written into every
// trace header, so reports never depend on the machine that reads them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace gpuos {

const std::map<int32_t, std::string>& SyscallNameTable();
// The number of a syscall by name, or -1.
int32_t SyscallNumber(const std::string& name);

}  // namespace gpuos
