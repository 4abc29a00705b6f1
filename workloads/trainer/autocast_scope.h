// --amp bf16: the C++ equivalent of `with torch.autocast(device, bfloat16)`
// around forward and loss.  LibTorch 2.4 replaced the per-device setters
// (set_enabled, set_cpu_enabled, set_autocast_gpu_dtype, ...) with
// set_autocast_enabled(device, on) / set_autocast_dtype(device, dtype);
// this picks whichever the LibTorch being built against has.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace gpuos::trainer {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define GPUOS_TRAINER_AUTOCAST_PER_DEVICE_API 1
#endif

class AutocastScope {
 public:
  // `enabled` false makes this a no-op, so call sites need no branch.
  // `cache` false is required while a CUDA graph is being captured (the
  // cast-weight cache would otherwise outlive the capture).
  AutocastScope(bool enabled, bool cuda, bool cache = true) : enabled_(enabled), cuda_(cuda) {
    if (!enabled_) return;
    previous_cache_ = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(cache);
    Set(true);
  }
  ~AutocastScope() {
    if (!enabled_) return;
    Set(false);
    // What Python's autocast.__exit__ does when the outermost scope ends:
    // drop the weights cast for this forward pass.
    at::autocast::clear_cache();
    at::autocast::set_autocast_cache_enabled(previous_cache_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  void Set(bool on) {
#ifdef GPUOS_TRAINER_AUTOCAST_PER_DEVICE_API
    const at::DeviceType device = cuda_ ? at::kCUDA : at::kCPU;
    at::autocast::set_autocast_dtype(device, at::kBFloat16);
    at::autocast::set_autocast_enabled(device, on);
#else
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(on);
    } else {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(on);
    }
#endif
  }

  bool enabled_;
  bool cuda_;
  bool previous_cache_ = true;
};

}  // namespace gpuos::trainer
