// cuda_support.h for a CUDA LibTorch.  Stream and graph handling follows
// PyTorch's own recipes: the prefetcher of the Nsight data-transfer article
// (copy stream, wait_stream, record_stream) and "whole network capture" in
// the CUDA graphs notes (eager warmup on a side stream, grads set to None
// before capture, capture on that side stream, replay on the current one).
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "absl/status/status.h"
#include "cuda_support.h"
#include "nvtx_range.h"
#include "trainer_options.h"

namespace gpuos::trainer {
namespace {

// `waiter` runs nothing new until everything issued on `signaller` so far
// has finished: Python's waiter.wait_stream(signaller).
void WaitStream(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& signaller) {
  at::cuda::CUDAEvent event;
  event.record(signaller);
  event.block(waiter);
}

class CudaCopyStream : public CopyStream {
 public:
  CudaCopyStream() : stream_(c10::cuda::getStreamFromPool()) {}

  void Run(const std::function<void()>& fn) override {
    c10::cuda::CUDAStreamGuard guard(stream_);
    fn();
  }

  void HandOver(const std::vector<torch::Tensor>& tensors) override {
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream();
    WaitStream(compute, stream_);
    for (const torch::Tensor& tensor : tensors) {
      if (tensor.defined() && tensor.is_cuda()) tensor.record_stream(compute);
    }
  }

 private:
  c10::cuda::CUDAStream stream_;
};

class CudaGraphedStep : public GraphedStep {
 public:
  explicit CudaGraphedStep(StepFn step)
      : step_(std::move(step)), side_(c10::cuda::getStreamFromPool()) {}

  torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& y) override {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream();
    if (!static_x_.defined()) {
      static_x_ = torch::empty_like(x);
      static_y_ = torch::empty_like(y);
    }
    // Device-to-device copies into the addresses the graph was captured
    // with, ordered on the current stream before the replay.
    static_x_.copy_(x, /*non_blocking=*/true);
    static_y_.copy_(y, /*non_blocking=*/true);

    if (calls_ < kCudaGraphEagerIterations) {
      ++calls_;
      WaitStream(side_, current);
      torch::Tensor loss;
      {
        c10::cuda::CUDAStreamGuard guard(side_);
        loss = step_(static_x_, static_y_, /*capturing=*/false);
      }
      WaitStream(current, side_);
      return loss;
    }
    if (calls_ == kCudaGraphEagerIterations) {
      NvtxRange range("graph capture", nvtx_color::kOther);
      WaitStream(side_, current);
      {
        c10::cuda::CUDAStreamGuard guard(side_);
        graph_.capture_begin();
        // The step's own zero_grad sets grads to None (LibTorch >= 2.0), so
        // backward allocates them from the graph's private pool and every
        // replay overwrites rather than accumulates them.
        static_loss_ = step_(static_x_, static_y_, /*capturing=*/true);
        graph_.capture_end();
      }
      WaitStream(current, side_);
    }
    ++calls_;
    {
      NvtxRange range("graph replay", nvtx_color::kOther);
      graph_.replay();
    }
    return static_loss_;
  }

 private:
  StepFn step_;
  c10::cuda::CUDAStream side_;
  at::cuda::CUDAGraph graph_;
  int64_t calls_ = 0;
  torch::Tensor static_x_;
  torch::Tensor static_y_;
  torch::Tensor static_loss_;
};

}  // namespace

bool BuiltWithCuda() { return true; }

absl::StatusOr<std::unique_ptr<CopyStream>> CopyStream::Create() {
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError("--copy-stream: no CUDA device is available");
  }
  return std::unique_ptr<CopyStream>(new CudaCopyStream());
}

absl::StatusOr<std::unique_ptr<GraphedStep>> GraphedStep::Create(StepFn step) {
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError("--cuda-graph: no CUDA device is available");
  }
  return std::unique_ptr<GraphedStep>(new CudaGraphedStep(std::move(step)));
}

}  // namespace gpuos::trainer
