// NVTX ranges around the phases of a training step, so that Nsight Systems
// (and gpuos-trace) can tell "get batch" from "forward".  NVTX3 is
// header-only: with no tool attached (no NVTX_INJECTION64_PATH) each call
// is a check of a null function pointer.  Built without the NVTX3 headers
// (GPUOS_TRAINER_HAVE_NVTX undefined), the ranges compile to nothing.
#pragma once

#include <cstdint>
#include <string>

#ifdef GPUOS_TRAINER_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace gpuos::trainer {

// ARGB colours, as in the Nsight Systems data-transfer articles.
namespace nvtx_color {
inline constexpr uint32_t kStep = 0xff1f77b4;       // blue
inline constexpr uint32_t kGetBatch = 0xffd62728;   // red
inline constexpr uint32_t kCopyBatch = 0xffffd700;  // yellow
inline constexpr uint32_t kForward = 0xff2ca02c;    // green
inline constexpr uint32_t kBackward = 0xff9467bd;   // purple
inline constexpr uint32_t kOptimizer = 0xffff7f0e;  // orange
inline constexpr uint32_t kOther = 0xff7f7f7f;      // grey
}  // namespace nvtx_color

inline constexpr bool kNvtxCompiledIn =
#ifdef GPUOS_TRAINER_HAVE_NVTX
    true;
#else
    false;
#endif

// Off (--no-nvtx): no range is pushed, as in a program nobody annotated.
// Set once, before the training loop starts.
inline bool& NvtxEnabled() {
  static bool enabled = true;
  return enabled;
}

// Pushes a range on construction and pops it on destruction, on the
// calling thread (NVTX push/pop ranges are per thread).
class NvtxRange {
 public:
  NvtxRange(const char* name, uint32_t argb) : pushed_(NvtxEnabled()) {
#ifdef GPUOS_TRAINER_HAVE_NVTX
    if (!pushed_) return;
    nvtxEventAttributes_t attributes = {};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.colorType = NVTX_COLOR_ARGB;
    attributes.color = argb;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name;
    nvtxRangePushEx(&attributes);
#else
    (void)name;
    (void)argb;
#endif
  }
  NvtxRange(const std::string& name, uint32_t argb) : NvtxRange(name.c_str(), argb) {}
  ~NvtxRange() {
#ifdef GPUOS_TRAINER_HAVE_NVTX
    if (pushed_) nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool pushed_;
};

}  // namespace gpuos::trainer
