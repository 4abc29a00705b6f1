// cuda_support.h for a CPU-only LibTorch: the CUDA-only options say what
// is missing instead of failing somewhere inside LibTorch.
#include "absl/status/status.h"
#include "cuda_support.h"

namespace gpuos::trainer {
namespace {

absl::Status NeedsCudaBuild(const char* option) {
  return absl::UnimplementedError(
      std::string(option) +
      " needs gpuos-trainer built against a CUDA LibTorch (this one was built against a "
      "CPU-only LibTorch)");
}

}  // namespace

bool BuiltWithCuda() { return false; }

absl::StatusOr<std::unique_ptr<CopyStream>> CopyStream::Create() {
  return NeedsCudaBuild("--copy-stream");
}

absl::StatusOr<std::unique_ptr<GraphedStep>> GraphedStep::Create(StepFn step) {
  return NeedsCudaBuild("--cuda-graph");
}

}  // namespace gpuos::trainer
