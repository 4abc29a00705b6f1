// The list of event sources (see bpf_source.h): one line per source.
#include "record/sources/bpf_source.h"

namespace gpuos {

// In load order (bpf_source.h).  syscalls last: once its programs are
// loaded, tracking starts soon after.  The uprobe sources: loaded on demand.
#define GPUOS_BPF_SOURCES(X) \
  X(kProcSource)             \
  X(kOffCpuSource)           \
  X(kFaultsSource)           \
  X(kBlockIoSource)          \
  X(kSyscallsSource)         \
  X(kCudaUprobesSource)      \
  X(kTorchUprobesSource)

#define GPUOS_DECLARE_SOURCE(module) extern const BpfSourceModule module;
GPUOS_BPF_SOURCES(GPUOS_DECLARE_SOURCE)
#undef GPUOS_DECLARE_SOURCE

const std::vector<const BpfSourceModule*>& BpfSourceModules() {
#define GPUOS_LIST_SOURCE(module) &module,
  static const auto* const kModules =
      new std::vector<const BpfSourceModule*>{GPUOS_BPF_SOURCES(GPUOS_LIST_SOURCE)};
#undef GPUOS_LIST_SOURCE
  return *kModules;
}

}  // namespace gpuos
