// Name-based classification of CUDA API calls; see cuda_api_class.h.
#include "analysis/cuda_api_class.h"

#include <cctype>

namespace gpuos {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Length of a trailing "_v<digits>" in `s`, or 0.
size_t VersionSuffixLength(std::string_view s) {
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[s.size() - 1 - digits]))) {
    ++digits;
  }
  if (digits == 0 || s.size() < digits + 2) return 0;
  if (s[s.size() - digits - 1] != 'v' || s[s.size() - digits - 2] != '_') return 0;
  return digits + 2;
}

bool AllocatesOrFrees(std::string_view name) {
  if (EndsWith(name, "Async")) return false;
  for (std::string_view prefix : {"cudaMalloc", "cudaFree", "cudaHostAlloc", "cuMemAlloc", "cuMemFree",
                                  "cuMemHostAlloc", "cuMemAddressReserve", "cuMemAddressFree"}) {
    if (StartsWith(name, prefix)) return true;
  }
  return name == "cuMemCreate" || name == "cuMemRelease" || name == "cuMemMap" || name == "cuMemUnmap";
}

}  // namespace

std::string_view StripCudaApiSuffixes(std::string_view name) {
  for (;;) {
    if (EndsWith(name, "_ptsz") || EndsWith(name, "_ptds")) {
      name.remove_suffix(5);
      continue;
    }
    size_t version = VersionSuffixLength(name);
    if (version == 0 || version == name.size()) return name;
    name.remove_suffix(version);
  }
}

CudaApiClass ClassifyCudaApi(std::string_view name) {
  name = StripCudaApiSuffixes(name);
  if (StartsWith(name, "cudaLaunch") || StartsWith(name, "cuLaunch") || name == "cudaGraphLaunch" ||
      name == "cuGraphLaunch") {
    return CudaApiClass::kLaunch;
  }
  if (name.find("Synchronize") != std::string_view::npos) return CudaApiClass::kSync;
  if (StartsWith(name, "cudaMemcpy") || StartsWith(name, "cuMemcpy")) return CudaApiClass::kMemcpy;
  if (StartsWith(name, "cudaMemset") || StartsWith(name, "cuMemset")) return CudaApiClass::kMemset;
  if (AllocatesOrFrees(name)) return CudaApiClass::kAllocate;
  return CudaApiClass::kOther;
}

bool NamesCopyToDevice(std::string_view name) { return StartsWith(name, "cuMemcpyHtoD"); }

const char* CudaApiClassName(CudaApiClass api_class) {
  switch (api_class) {
    case CudaApiClass::kLaunch: return "launch";
    case CudaApiClass::kSync: return "sync";
    case CudaApiClass::kMemcpy: return "memcpy";
    case CudaApiClass::kMemset: return "memset";
    case CudaApiClass::kAllocate: return "allocate";
    default: return "other";
  }
}

}  // namespace gpuos
