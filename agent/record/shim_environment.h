// The environment that puts the CUDA/NVTX shim into every process of a
// launched tree: LD_PRELOAD (so it is there from the first instruction),
// CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH (so CUDA and NVTX call
// into it when they start), and either the agent's socket (a launched
// trace) or GPUOS_SHIM_PREPARED=1 (`--prepare`: idle until an attach).
#pragma once

#include <string>
#include <vector>

namespace gpuos {

// "NAME=value" entries.  `socket_path` empty: prepared (idle) mode.
// `python_hooks_dir` non-empty: put the Python start-up hook on PYTHONPATH.
// `cuda_records` non-empty: the CUDA record kinds the shim enables
// (GPUOS_CUPTI_KINDS; --cuda-records); empty: all.
// `capture_spec` non-empty: CUDA detail only in the windows it names
// (GPUOS_CAPTURE; --capture, --always-on).
// Another tool already named by an injection variable is left in place,
// with a warning on stderr.
std::vector<std::string> ShimEnvironment(const std::string& shim, const std::string& socket_path,
                                         const std::string& python_hooks_dir,
                                         const std::string& cuda_records = "",
                                         const std::string& capture_spec = "");

}  // namespace gpuos
