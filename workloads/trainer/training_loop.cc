// See training_loop.h.
#include "training_loop.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "autocast_scope.h"
#include "cuda_support.h"
#include "models.h"
#include "nvtx_range.h"
#include "shutdown_signal.h"

namespace gpuos::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A batch on the training device.  On the CPU the tensors alias the
// loader's memory (no copy, as DataLoader's shared-memory tensors), so the
// host batch stays held until the step is done.
struct DeviceBatch {
  torch::Tensor x;
  torch::Tensor y;
  std::optional<HostBatch> held;
};

void ZeroGrad(torch::optim::Optimizer& optimizer) {
#if TORCH_VERSION_MAJOR >= 2
  // Grads become undefined rather than zero-filled: one fewer kernel per
  // parameter, and what a captured CUDA graph needs (see cuda_support).
  optimizer.zero_grad(/*set_to_none=*/true);
#else
  optimizer.zero_grad();
#endif
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

class Trainer {
 public:
  Trainer(const TrainerOptions& options, BatchLoader& loader)
      : options_(options),
        loader_(loader),
        cuda_(options.device == DeviceKind::kCuda),
        device_(cuda_ ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU)) {}

  absl::StatusOr<TrainingResult> Run();

 private:
  absl::Status Setup();
  absl::StatusOr<DeviceBatch> Fetch();
  torch::Tensor Step(const torch::Tensor& x, const torch::Tensor& y, bool capturing);
  void SyncDevice() {
    if (cuda_) torch::cuda::synchronize();
  }

  const TrainerOptions& options_;
  BatchLoader& loader_;
  const bool cuda_;
  const torch::Device device_;
  BuiltModel model_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<CopyStream> copy_stream_;
  std::unique_ptr<GraphedStep> graphed_step_;
  bool measuring_ = false;
  Clock::duration get_batch_time_{};
};

absl::Status Trainer::Setup() {
  if (cuda_ && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device cuda: no CUDA device is usable",
        BuiltWithCuda() ? "" : " (gpuos-trainer was built against a CPU-only LibTorch)"));
  }
  if (options_.threads > 0) torch::set_num_threads(static_cast<int>(options_.threads));
  torch::manual_seed(options_.seed);
  model_ = BuildModel(options_);
  model_.net->to(device_);
  model_.net->train();
  optimizer_ = std::make_unique<torch::optim::SGD>(
      model_.net->parameters(), torch::optim::SGDOptions(options_.lr).momentum(0.9));
  if (options_.copy_stream) {
    absl::StatusOr<std::unique_ptr<CopyStream>> copy = CopyStream::Create();
    if (!copy.ok()) return copy.status();
    copy_stream_ = std::move(*copy);
  }
  if (options_.cuda_graph) {
    absl::StatusOr<std::unique_ptr<GraphedStep>> graphed = GraphedStep::Create(
        [this](const torch::Tensor& x, const torch::Tensor& y, bool capturing) {
          return Step(x, y, capturing);
        });
    if (!graphed.ok()) return graphed.status();
    graphed_step_ = std::move(*graphed);
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceBatch> Trainer::Fetch() {
  DeviceBatch batch;
  torch::Tensor host_x;
  torch::Tensor host_y;
  {
    NvtxRange range("get batch", nvtx_color::kGetBatch);
    const Clock::time_point start = Clock::now();
    absl::StatusOr<HostBatch> host = loader_.Next();
    if (!host.ok()) return host.status();
    const ImageShape& image = options_.image;
    host_x = torch::from_blob(host->images,
                              {options_.batch_size, image.channels, image.height, image.width},
                              torch::TensorOptions().dtype(torch::kFloat));
    host_y = torch::from_blob(host->labels, {options_.batch_size},
                              torch::TensorOptions().dtype(torch::kLong));
    if (options_.pin_memory) {
      // DataLoader's pin_memory: a fresh pinned tensor per batch from the
      // caching host allocator, which does not recycle it until the
      // copies that read it have finished on the GPU.
      NvtxRange pin("pin batch", nvtx_color::kGetBatch);
      const auto pinned = torch::TensorOptions().pinned_memory(true);
      torch::Tensor pinned_x = torch::empty(host_x.sizes(), pinned.dtype(torch::kFloat));
      torch::Tensor pinned_y = torch::empty(host_y.sizes(), pinned.dtype(torch::kLong));
      pinned_x.copy_(host_x);
      pinned_y.copy_(host_y);
      loader_.Release(*host);
      host_x = pinned_x;
      host_y = pinned_y;
    } else {
      batch.held = *host;
    }
    if (measuring_) get_batch_time_ += Clock::now() - start;
  }
  {
    NvtxRange range("copy batch", nvtx_color::kCopyBatch);
    if (cuda_) {
      batch.x = host_x.to(device_, torch::kFloat, options_.non_blocking);
      batch.y = host_y.to(device_, torch::kLong, options_.non_blocking);
      // A pageable source is staged by the driver before the copy call
      // returns, and a pinned one is already released: the loader's
      // memory can be reused now.
      if (batch.held) {
        loader_.Release(*batch.held);
        batch.held.reset();
      }
    } else {
      batch.x = host_x;
      batch.y = host_y;
    }
  }
  return batch;
}

torch::Tensor Trainer::Step(const torch::Tensor& x, const torch::Tensor& y, bool capturing) {
  torch::Tensor loss;
  {
    NvtxRange range("forward", nvtx_color::kForward);
    AutocastScope autocast(options_.amp == AmpMode::kBf16, cuda_, /*cache=*/!capturing);
    torch::Tensor logits = model_.net->forward(x);
    loss = torch::nn::functional::cross_entropy(logits, y);
  }
  {
    NvtxRange range("backward", nvtx_color::kBackward);
    ZeroGrad(*optimizer_);
    loss.backward();
  }
  {
    NvtxRange range("optimizer step", nvtx_color::kOptimizer);
    optimizer_->step();
  }
  return loss.detach();
}

absl::StatusOr<TrainingResult> Trainer::Run() {
  if (absl::Status status = Setup(); !status.ok()) return status;

  std::optional<DeviceBatch> prefetched;  // --copy-stream: the next batch, already in flight
  absl::Status fetch_status = absl::OkStatus();
  auto fetch_on_copy_stream = [&] {
    copy_stream_->Run([&] {
      absl::StatusOr<DeviceBatch> next = Fetch();
      if (next.ok()) {
        prefetched = std::move(*next);
      } else {
        fetch_status = next.status();
      }
    });
  };

  torch::Tensor last_loss;
  Clock::time_point start = Clock::now();
  for (int64_t step = 0; step < options_.steps; ++step) {
    if (int signo = ShutdownSignal(); signo != 0) {
      return absl::CancelledError(
          absl::StrFormat("interrupted by %s at step %d", strsignal(signo), step));
    }
    if (step == options_.warmup) {
      SyncDevice();
      start = Clock::now();
      measuring_ = true;
    }
    NvtxRange step_range(absl::StrCat("step ", step), nvtx_color::kStep);
    DeviceBatch batch;
    if (copy_stream_ != nullptr) {
      if (step == 0) fetch_on_copy_stream();
      if (!fetch_status.ok()) return fetch_status;
      batch = std::move(*prefetched);
      prefetched.reset();
      copy_stream_->HandOver({batch.x, batch.y});
      // Batch N+1's "get batch" and "copy batch" ranges sit in step N, as
      // in the article's prefetcher: its copy overlaps step N's kernels.
      if (step + 1 < options_.steps) {
        fetch_on_copy_stream();
        if (!fetch_status.ok()) return fetch_status;
      }
    } else {
      absl::StatusOr<DeviceBatch> fetched = Fetch();
      if (!fetched.ok()) return fetched.status();
      batch = std::move(*fetched);
    }
    last_loss = graphed_step_ != nullptr ? graphed_step_->Run(batch.x, batch.y)
                                         : Step(batch.x, batch.y, /*capturing=*/false);
    if (batch.held) loader_.Release(*batch.held);
  }
  SyncDevice();
  const Clock::duration elapsed = Clock::now() - start;

  TrainingResult result;
  result.parameters = model_.parameters;
  result.threads = torch::get_num_threads();
  result.elapsed_s = Seconds(elapsed);
  result.get_batch_s = Seconds(get_batch_time_);
  const double measured = static_cast<double>(options_.measured_steps());
  result.steps_per_s = result.elapsed_s > 0 ? measured / result.elapsed_s : 0;
  result.samples_per_s = result.steps_per_s * static_cast<double>(options_.batch_size);
  result.final_loss = last_loss.item<float>();
  return result;
}

}  // namespace

absl::StatusOr<TrainingResult> RunTraining(const TrainerOptions& options, BatchLoader& loader) {
  try {
    Trainer trainer(options, loader);
    return trainer.Run();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("LibTorch: ", FirstLine(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    return absl::InternalError(FirstLine(e.what()));
  }
}

}  // namespace gpuos::trainer
