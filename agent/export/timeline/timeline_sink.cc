// Category names shared by every output format (see timeline/timeline_sink.h).
#include "export/timeline/timeline_sink.h"

namespace gpuos {

const char* SliceCategoryName(SliceCategory category) {
  switch (category) {
    case SliceCategory::kCuda:
      return "cuda";
    case SliceCategory::kGpu:
      return "gpu";
    case SliceCategory::kNvtx:
      return "nvtx";
    case SliceCategory::kOs:
      return "os";
    case SliceCategory::kSched:
      return "sched";
    case SliceCategory::kStep:
      return "step";
    case SliceCategory::kProcess:
      return "process";
  }
  return "other";
}

}  // namespace gpuos
