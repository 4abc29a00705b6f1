// gpuos-trainer's command line: what one experiment run is (model, data
// pipeline, device-side transfer options), parsed and checked before any
// process is forked or any LibTorch code runs, so that a typo costs nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuos::trainer {

enum class DeviceKind { kCpu, kCuda };
enum class ModelKind { kTiny, kMlp, kCnn };
enum class AmpMode { kNone, kBf16 };

struct ImageShape {
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int64_t elements() const { return channels * height * width; }
};

struct TrainerOptions {
  DeviceKind device = DeviceKind::kCpu;
  ModelKind model = ModelKind::kTiny;
  // mlp: hidden width and number of hidden layers.  cnn: base channel width
  // and residual blocks per stage.  0 means "the model's default".
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t batch_size = 64;
  int64_t steps = 50;   // total, warmup included
  int64_t warmup = 5;   // first steps, left out of the throughput
  int64_t workers = 0;  // data loading processes; 0 loads in the main thread
  int64_t prefetch_factor = 2;  // batch slots per worker, as in DataLoader
  int64_t preprocess_us = 0;    // CPU busy work per sample, in a worker
  std::string read_direct;      // a file each sample reads from with O_DIRECT (storage_reads.h)
  int64_t read_kib = 256;       // KiB each sample reads from it
  ImageShape image;
  std::string mnist_dir;  // empty: synthetic data
  bool pin_memory = false;
  bool non_blocking = false;
  bool copy_stream = false;
  bool cuda_graph = false;
  bool nvtx = true;  // --no-nvtx: no NVTX ranges, like a script nobody annotated
  AmpMode amp = AmpMode::kNone;
  int64_t threads = 0;  // intra-op threads; 0 keeps LibTorch's default
  uint64_t seed = 0;
  float lr = 0.01f;
  bool help = false;  // --help: print the usage and do nothing else

  int64_t measured_steps() const { return steps - warmup; }
};

// Steps run eagerly on the capture stream before --cuda-graph captures one,
// so that lazily created state (optimizer buffers, cuBLAS workspaces)
// exists before capture.
inline constexpr int64_t kCudaGraphEagerIterations = 3;

// Parses argv[1..] and fills in model-dependent defaults (hidden, layers).
// Errors are one line naming the offending option.
absl::StatusOr<TrainerOptions> ParseTrainerOptions(const std::vector<std::string>& args);

std::string TrainerUsage();

const char* DeviceName(DeviceKind device);
const char* ModelName(ModelKind model);
const char* AmpName(AmpMode amp);
std::string ImageShapeString(const ImageShape& shape);

}  // namespace gpuos::trainer
