// Finds libcupti with dlopen and fills the CuptiApi table (cupti_loader.h).
#include "cupti_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>

namespace gpuos_shim {
namespace {

// The table's types come from cupti.h's own declarations, so a signature
// that changes in a new CUDA fails here at compile time, not at run time.
// (decltype(&f) is unevaluated: nothing links against libcupti.)
#define GPUOS_CUPTI_SAME_TYPE(field, function)                                  \
  static_assert(std::is_same_v<decltype(CuptiApi::field), decltype(&function)>, \
                "CuptiApi::" #field " does not match cupti.h's " #function)
GPUOS_CUPTI_SAME_TYPE(GetVersion, cuptiGetVersion);
GPUOS_CUPTI_SAME_TYPE(GetResultString, cuptiGetResultString);
GPUOS_CUPTI_SAME_TYPE(GetCallbackName, cuptiGetCallbackName);
GPUOS_CUPTI_SAME_TYPE(Subscribe, cuptiSubscribe);
GPUOS_CUPTI_SAME_TYPE(Unsubscribe, cuptiUnsubscribe);
GPUOS_CUPTI_SAME_TYPE(EnableCallback, cuptiEnableCallback);
GPUOS_CUPTI_SAME_TYPE(ActivityRegisterTimestampCallback, cuptiActivityRegisterTimestampCallback);
GPUOS_CUPTI_SAME_TYPE(ActivityRegisterCallbacks, cuptiActivityRegisterCallbacks);
GPUOS_CUPTI_SAME_TYPE(ActivityEnable, cuptiActivityEnable);
GPUOS_CUPTI_SAME_TYPE(ActivityDisable, cuptiActivityDisable);
GPUOS_CUPTI_SAME_TYPE(ActivityGetNextRecord, cuptiActivityGetNextRecord);
GPUOS_CUPTI_SAME_TYPE(ActivityGetNumDroppedRecords, cuptiActivityGetNumDroppedRecords);
GPUOS_CUPTI_SAME_TYPE(ActivityFlushAll, cuptiActivityFlushAll);
GPUOS_CUPTI_SAME_TYPE(SetThreadIdType, cuptiSetThreadIdType);
GPUOS_CUPTI_SAME_TYPE(ActivityEnableRuntimeApi, cuptiActivityEnableRuntimeApi);
GPUOS_CUPTI_SAME_TYPE(ActivityEnableDriverApi, cuptiActivityEnableDriverApi);
GPUOS_CUPTI_SAME_TYPE(ActivityEnableAllSyncRecords, cuptiActivityEnableAllSyncRecords);
GPUOS_CUPTI_SAME_TYPE(ActivitySetAttribute, cuptiActivitySetAttribute);
GPUOS_CUPTI_SAME_TYPE(EnableDomain, cuptiEnableDomain);
GPUOS_CUPTI_SAME_TYPE(Finalize, cuptiFinalize);
GPUOS_CUPTI_SAME_TYPE(GetTimestamp, cuptiGetTimestamp);
#undef GPUOS_CUPTI_SAME_TYPE

constexpr const char* kAlreadyLoadedNames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
constexpr const char* kSearchName = "libcupti.so.13";
constexpr const char* kFallbackPaths[] = {"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                                          "/usr/local/cuda/lib64/libcupti.so.13"};

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

// The file a handle came from, for ShimStats.cupti_status.
std::string LibraryPath(void* handle, const std::string& fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* slot) {
  void* symbol = dlsym(handle, name);
  *slot = reinterpret_cast<Fn>(symbol);
  return symbol != nullptr;
}

// Opens libcupti; on failure says what was tried.
void* OpenLibrary(bool* was_loaded, std::string* tried_name, std::string* error) {
  for (const char* name : kAlreadyLoadedNames) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
      *was_loaded = true;
      *tried_name = name;
      return handle;
    }
  }
  dlerror();  // RTLD_NOLOAD misses leave an error behind; not ours to report
  *was_loaded = false;

  if (const char* path = getenv("GPUOS_CUPTI_LIBRARY"); path != nullptr && path[0] != '\0') {
    // An explicit choice is not second-guessed with a fallback that could
    // hide a typo.
    *tried_name = path;
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) return handle;
    *error = "GPUOS_CUPTI_LIBRARY=" + std::string(path) + " could not be loaded: " + DlError();
    return nullptr;
  }

  std::string errors;
  *tried_name = kSearchName;
  if (void* handle = dlopen(kSearchName, RTLD_NOW | RTLD_LOCAL)) return handle;
  errors = DlError();
  for (const char* path : kFallbackPaths) {
    *tried_name = path;
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  *error = "libcupti.so.13 not found (" + errors +
           "; nor under /usr/local/cuda); set GPUOS_CUPTI_LIBRARY to its path";
  return nullptr;
}

CuptiLoadResult Load() {
  CuptiLoadResult result;
  bool was_loaded = false;
  std::string tried_name;
  void* handle = OpenLibrary(&was_loaded, &tried_name, &result.error);
  if (handle == nullptr) return result;

  // Leaked on purpose: the table and the library stay for the life of the
  // process, since CUPTI may call back into us until the very end.
  auto* api = new CuptiApi();
  api->was_loaded = was_loaded;
  api->library_path = LibraryPath(handle, tried_name);

  struct Required {
    const char* name;
    bool found;
  };
  const Required required[] = {
      {"cuptiGetVersion", Resolve(handle, "cuptiGetVersion", &api->GetVersion)},
      {"cuptiGetResultString", Resolve(handle, "cuptiGetResultString", &api->GetResultString)},
      {"cuptiGetCallbackName", Resolve(handle, "cuptiGetCallbackName", &api->GetCallbackName)},
      {"cuptiSubscribe", Resolve(handle, "cuptiSubscribe", &api->Subscribe)},
      {"cuptiUnsubscribe", Resolve(handle, "cuptiUnsubscribe", &api->Unsubscribe)},
      {"cuptiEnableCallback", Resolve(handle, "cuptiEnableCallback", &api->EnableCallback)},
      {"cuptiActivityRegisterTimestampCallback",
       Resolve(handle, "cuptiActivityRegisterTimestampCallback",
               &api->ActivityRegisterTimestampCallback)},
      {"cuptiActivityRegisterCallbacks",
       Resolve(handle, "cuptiActivityRegisterCallbacks", &api->ActivityRegisterCallbacks)},
      {"cuptiActivityEnable", Resolve(handle, "cuptiActivityEnable", &api->ActivityEnable)},
      {"cuptiActivityDisable", Resolve(handle, "cuptiActivityDisable", &api->ActivityDisable)},
      {"cuptiActivityGetNextRecord",
       Resolve(handle, "cuptiActivityGetNextRecord", &api->ActivityGetNextRecord)},
      {"cuptiActivityGetNumDroppedRecords",
       Resolve(handle, "cuptiActivityGetNumDroppedRecords", &api->ActivityGetNumDroppedRecords)},
      {"cuptiActivityFlushAll", Resolve(handle, "cuptiActivityFlushAll", &api->ActivityFlushAll)},
      {"cuptiSetThreadIdType", Resolve(handle, "cuptiSetThreadIdType", &api->SetThreadIdType)},
  };
  Resolve(handle, "cuptiActivityEnableRuntimeApi", &api->ActivityEnableRuntimeApi);
  Resolve(handle, "cuptiActivityEnableDriverApi", &api->ActivityEnableDriverApi);
  Resolve(handle, "cuptiActivityEnableAllSyncRecords", &api->ActivityEnableAllSyncRecords);
  Resolve(handle, "cuptiActivitySetAttribute", &api->ActivitySetAttribute);
  Resolve(handle, "cuptiEnableDomain", &api->EnableDomain);
  Resolve(handle, "cuptiFinalize", &api->Finalize);
  Resolve(handle, "cuptiGetTimestamp", &api->GetTimestamp);
  dlerror();

  std::string missing;
  for (const Required& function : required) {
    if (!function.found) missing += (missing.empty() ? "" : ", ") + std::string(function.name);
  }
  if (!missing.empty()) {
    result.error = api->library_path + " lacks CUPTI functions the shim needs (" + missing +
                   "); set GPUOS_CUPTI_LIBRARY to a libcupti from CUDA 12.x or newer";
    return result;
  }

  CUptiResult status = api->GetVersion(&api->version);
  if (status != CUPTI_SUCCESS) {
    result.error = api->library_path + ": cuptiGetVersion failed: " + CuptiResultName(api, status);
    return result;
  }
  if (api->version < kMinCuptiApiVersion) {
    result.error = api->library_path + " is CUPTI API version " + std::to_string(api->version) +
                   ", older than CUDA 12.0's (" + std::to_string(kMinCuptiApiVersion) +
                   "); set GPUOS_CUPTI_LIBRARY to a newer libcupti";
    return result;
  }
  result.api = api;
  return result;
}

}  // namespace

CuptiLoadResult LoadCupti() {
  static std::once_flag once;
  static CuptiLoadResult* result = nullptr;
  std::call_once(once, [] { result = new CuptiLoadResult(Load()); });
  return *result;
}

std::string CuptiResultName(const CuptiApi* api, CUptiResult result) {
  const char* name = nullptr;
  if (api != nullptr && api->GetResultString != nullptr &&
      api->GetResultString(result, &name) == CUPTI_SUCCESS && name != nullptr) {
    return name;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

}  // namespace gpuos_shim
