// A minimal NVTX tool for gpuos_trainer_test: loaded by NVTX3 through
// NVTX_INJECTION64_PATH, it appends one line per push ("push\t<name>") and
// pop ("pop") to the file named by GPUOS_NVTX_LOG, so the test can check
// the trainer's range names and nesting without Nsight Systems.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

std::mutex g_mutex;
FILE* g_log = nullptr;

void WriteLine(const char* kind, const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_log == nullptr) return;
  if (name != nullptr) {
    std::fprintf(g_log, "%s\t%s\n", kind, name);
  } else {
    std::fprintf(g_log, "%s\n", kind);
  }
  // Flushed per line: the test also reads logs of runs it interrupted.
  std::fflush(g_log);
}

int NVTX_API RangePushEx(const nvtxEventAttributes_t* attributes) {
  const bool ascii = attributes != nullptr && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII;
  WriteLine("push", ascii ? attributes->message.ascii : "<non-ascii>");
  return 0;
}

int NVTX_API RangePushA(const char* message) {
  WriteLine("push", message);
  return 0;
}

int NVTX_API RangePop() {
  WriteLine("pop", nullptr);
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const char* path = std::getenv("GPUOS_NVTX_LOG");
  if (path == nullptr) return 0;
  g_log = std::fopen(path, "w");
  if (g_log == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || table == nullptr) {
    return 0;
  }
  if (size > NVTX_CBID_CORE_RangePop) {
    *table[NVTX_CBID_CORE_RangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&RangePushEx);
    *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&RangePushA);
    *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&RangePop);
  }
  return 1;
}
