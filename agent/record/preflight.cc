// Recording prerequisites; see preflight.h.
#include "record/preflight.h"

#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpuos {
namespace {

constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

bool HasEffective(const __user_cap_data_struct (&data)[2], int cap) {
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

bool IsDir(const char* path) { return access(path, F_OK) == 0; }

}  // namespace

absl::Status CheckPrivileges() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) {
    return absl::InternalError(absl::StrFormat("cannot read capabilities: %s", strerror(errno)));
  }
  if (HasEffective(data, kCapSysAdmin)) return absl::OkStatus();
  std::vector<std::string> missing;
  if (!HasEffective(data, kCapBpf)) missing.push_back("CAP_BPF");
  if (!HasEffective(data, kCapPerfmon)) missing.push_back("CAP_PERFMON");
  if (missing.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrFormat(
      "recording needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) to load eBPF programs; "
      "missing %s: run it with sudo",
      absl::StrJoin(missing, " and ")));
}

absl::Status CheckKernelBtf(const std::string& btf_path) {
  const std::string path = btf_path.empty() ? "/sys/kernel/btf/vmlinux" : btf_path;
  if (access(path.c_str(), R_OK) == 0) return absl::OkStatus();
  int err = errno;
  if (btf_path.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel BTF not found at %s (%s): this kernel was built without "
        "CONFIG_DEBUG_INFO_BTF; pass --btf FILE with BTF for it",
        path, strerror(err)));
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("cannot read the BTF file %s: %s", path, strerror(err)));
}

absl::Status EnsureTracefs() {
  if (IsDir("/sys/kernel/tracing/events") || IsDir("/sys/kernel/debug/tracing/events")) {
    return absl::OkStatus();
  }
  // Often tracefs is only unmounted (containers, minimal images): mount it
  // where libbpf looks for it.
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0 &&
      IsDir("/sys/kernel/tracing/events")) {
    return absl::OkStatus();
  }
  int err = errno;
  return absl::FailedPreconditionError(absl::StrFormat(
      "tracefs is not mounted and mounting it at /sys/kernel/tracing failed (%s): "
      "run 'mount -t tracefs nodev /sys/kernel/tracing' first",
      strerror(err)));
}

}  // namespace gpuos
