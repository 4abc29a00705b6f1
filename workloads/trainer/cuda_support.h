// The CUDA-specific pieces of the training loop, which need c10::cuda /
// at::cuda and so only exist when LibTorch was built with CUDA
// (GPUOS_TRAINER_WITH_CUDA, set by workloads/CMakeLists.txt).  Elsewhere
// Create() explains that this build cannot do it.  Everything else on CUDA
// (pinned memory, non-blocking copies, autocast) goes through LibTorch's
// device-generic API and needs nothing from here.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuos::trainer {

// Whether this binary was compiled against a CUDA LibTorch.
bool BuiltWithCuda();

// --copy-stream: a second CUDA stream that host-to-device copies are issued
// on, so that batch N+1's copy overlaps batch N's kernels.
class CopyStream {
 public:
  static absl::StatusOr<std::unique_ptr<CopyStream>> Create();
  virtual ~CopyStream() = default;

  // Runs `fn` with the copy stream as the current CUDA stream.
  virtual void Run(const std::function<void()>& fn) = 0;

  // Makes the current (compute) stream wait for everything issued on the
  // copy stream so far, and tells the caching allocator that `tensors`,
  // allocated on the copy stream, are now used on the compute stream (so
  // their memory is not handed out again while kernels still read it).
  virtual void HandOver(const std::vector<torch::Tensor>& tensors) = 0;
};

// --cuda-graph: runs the first kCudaGraphEagerIterations steps eagerly on a
// side stream, captures the next one into a CUDA graph, and from then on
// copies each batch into the captured input tensors and replays the graph.
class GraphedStep {
 public:
  // One eager training step on (x, y) returning the loss.  `capturing`:
  // the step is being recorded into a graph (autocast must not cache).
  using StepFn =
      std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& y, bool capturing)>;

  static absl::StatusOr<std::unique_ptr<GraphedStep>> Create(StepFn step);
  virtual ~GraphedStep() = default;

  // Trains on (x, y), device tensors of the same shape every call.  The
  // returned loss may be a tensor that the next call overwrites.
  virtual torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& y) = 0;
};

}  // namespace gpuos::trainer
