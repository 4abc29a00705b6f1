// Where the functions of an ELF shared library lie in its file: the file
// offsets uprobes are placed by, for the defined functions whose symbol
// names a caller picks (libcuda's driver API for the CUDA uprobes, the
// autograd engine's entry in libtorch_cpu for the backward probes).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuos {

// File offset by symbol name of every defined function of the ELF file at
// `path` whose name `wanted` accepts, from its dynamic symbol table and,
// where present, the full one (libcuda is stripped of the latter).  Empty
// when none is accepted; an error when the file cannot be read or is not
// ELF.
absl::StatusOr<std::map<std::string, uint64_t>> ElfFunctionOffsets(
    const std::string& path, absl::FunctionRef<bool(absl::string_view)> wanted);

}  // namespace gpuos
