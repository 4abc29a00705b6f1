// Checks what recording needs before anything is loaded, so that each
// missing piece gets one line that says what to do: privileges (CAP_BPF and
// CAP_PERFMON, or CAP_SYS_ADMIN), kernel BTF, and tracefs (mounted here if
// it is merely unmounted).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gpuos {

absl::Status CheckPrivileges();
// `btf_path` empty: the running kernel's /sys/kernel/btf/vmlinux.
absl::Status CheckKernelBtf(const std::string& btf_path);
absl::Status EnsureTracefs();

}  // namespace gpuos
