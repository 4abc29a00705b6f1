// The list of event sources (see bpf_source.h): one line per source.
#include "record/sources/bpf_source.h"

namespace gpuos {

// In load and attach order.  syscalls first: its exit handler moves a
// thread's totals out of its slot before proc tells the agent of the exit
// (bpf/syscalls.bpf.c).  The uprobe sources last: loaded on demand.
#define GPUOS_BPF_SOURCES(X) \
  X(kSyscallsSource)         \
  X(kProcSource)             \
  X(kOffCpuSource)           \
  X(kFaultsSource)           \
  X(kBlockIoSource)          \
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
