// Parsing and checking gpuos-trainer's options.  Everything a run could
// trip over later (a CUDA-only option on the CPU, a warmup longer than the
// run) is rejected here, with the option's name in the message.
#include "trainer_options.h"

#include <functional>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace gpuos::trainer {
namespace {

constexpr int64_t kMlpDefaultHidden = 1024;
constexpr int64_t kMlpDefaultLayers = 2;
constexpr int64_t kCnnDefaultWidth = 32;
constexpr int64_t kCnnDefaultBlocks = 1;

absl::Status BadValue(absl::string_view option, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: '%s' is not %s", option, value, want));
}

absl::StatusOr<int64_t> ParseInt(absl::string_view option, absl::string_view value, int64_t min,
                                 int64_t max) {
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < min || parsed > max) {
    return BadValue(option, value, absl::StrFormat("an integer in [%d, %d]", min, max));
  }
  return parsed;
}

absl::StatusOr<ImageShape> ParseImageShape(absl::string_view value) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, 'x');
  if (parts.size() != 3) {
    return BadValue("--image-size", value, "CxHxW (for example 3x224x224)");
  }
  int64_t dims[3];
  for (int i = 0; i < 3; ++i) {
    if (!absl::SimpleAtoi(parts[i], &dims[i]) || dims[i] < 1 || dims[i] > 4096) {
      return BadValue("--image-size", value, "CxHxW with each dimension in [1, 4096]");
    }
  }
  if (dims[0] > 64) {
    return BadValue("--image-size", value, "CxHxW with at most 64 channels");
  }
  return ImageShape{dims[0], dims[1], dims[2]};
}

}  // namespace

const char* DeviceName(DeviceKind device) { return device == DeviceKind::kCuda ? "cuda" : "cpu"; }

const char* ModelName(ModelKind model) {
  switch (model) {
    case ModelKind::kTiny: return "tiny";
    case ModelKind::kMlp: return "mlp";
    case ModelKind::kCnn: return "cnn";
  }
  return "?";
}

const char* AmpName(AmpMode amp) { return amp == AmpMode::kBf16 ? "bf16" : "none"; }

std::string ImageShapeString(const ImageShape& shape) {
  return absl::StrFormat("%dx%dx%d", shape.channels, shape.height, shape.width);
}

std::string TrainerUsage() {
  return R"(usage: gpuos-trainer [options]
Trains a small model on synthetic (or MNIST) data for a fixed number of
steps and prints one key=value summary line.  NVTX ranges: "step N" with
nested "get batch", "copy batch", "forward", "backward", "optimizer step".

  --device cpu|cuda        where to train (default cpu)
  --model tiny|mlp|cnn     tiny: one linear layer + ReLU; mlp: --layers hidden
                           layers of width --hidden (default 2 x 1024);
                           cnn: ResNet-style, base width --hidden (default 32),
                           --layers residual blocks per stage (default 1)
  --hidden N, --layers N   model size (mlp, cnn)
  --batch-size N           samples per step (default 64)
  --steps N                total steps, warmup included (default 50)
  --warmup N               first steps left out of the throughput (default 5)
  --workers N              data loading processes (default 0: main thread)
  --prefetch-factor N      batches in flight per worker (default 2)
  --preprocess-us N        CPU busy work per sample, in microseconds (default 0)
  --read-direct FILE       each sample also reads --read-kib KiB of FILE with
                           O_DIRECT (storage the page cache does not hold)
  --read-kib N             KiB per sample for --read-direct (default 256)
  --image-size CxHxW       synthetic sample shape (default 1x28x28)
  --mnist DIR              read DIR/train-images-idx3-ubyte and
                           DIR/train-labels-idx1-ubyte instead of synthetic data
  --pin-memory             stage batches in pinned host memory (cuda)
  --non-blocking           asynchronous host-to-device copies (cuda)
  --copy-stream            copy the next batch on its own stream while the
                           current one computes (cuda)
  --cuda-graph             capture one training step, then replay it (cuda)
  --no-nvtx                no NVTX ranges (an unannotated run of the same binary)
  --amp bf16|none          bfloat16 autocast for forward and loss (default none)
  --threads N              LibTorch intra-op threads (default: LibTorch's choice)
  --lr X                   SGD learning rate (default 0.01)
  --seed N                 seed for weights and data (default 0)
  --help                   print this text
)";
}

absl::StatusOr<TrainerOptions> ParseTrainerOptions(const std::vector<std::string>& args) {
  TrainerOptions options;
  bool hidden_given = false;
  bool layers_given = false;

  using ValueHandler = std::function<absl::Status(absl::string_view)>;
  const std::map<std::string, ValueHandler> value_options = {
      {"--device",
       [&](absl::string_view v) -> absl::Status {
         if (v == "cpu") options.device = DeviceKind::kCpu;
         else if (v == "cuda") options.device = DeviceKind::kCuda;
         else return BadValue("--device", v, "cpu or cuda");
         return absl::OkStatus();
       }},
      {"--model",
       [&](absl::string_view v) -> absl::Status {
         if (v == "tiny") options.model = ModelKind::kTiny;
         else if (v == "mlp") options.model = ModelKind::kMlp;
         else if (v == "cnn") options.model = ModelKind::kCnn;
         else return BadValue("--model", v, "tiny, mlp or cnn");
         return absl::OkStatus();
       }},
      {"--amp",
       [&](absl::string_view v) -> absl::Status {
         if (v == "bf16") options.amp = AmpMode::kBf16;
         else if (v == "none") options.amp = AmpMode::kNone;
         else return BadValue("--amp", v, "bf16 or none");
         return absl::OkStatus();
       }},
      {"--image-size",
       [&](absl::string_view v) -> absl::Status {
         absl::StatusOr<ImageShape> shape = ParseImageShape(v);
         if (!shape.ok()) return shape.status();
         options.image = *shape;
         return absl::OkStatus();
       }},
      {"--mnist",
       [&](absl::string_view v) -> absl::Status {
         if (v.empty()) return BadValue("--mnist", v, "a directory");
         options.mnist_dir = std::string(v);
         return absl::OkStatus();
       }},
      {"--lr",
       [&](absl::string_view v) -> absl::Status {
         float lr = 0;
         if (!absl::SimpleAtof(v, &lr) || !(lr > 0) || lr > 100) {
           return BadValue("--lr", v, "a number in (0, 100]");
         }
         options.lr = lr;
         return absl::OkStatus();
       }},
      {"--read-direct",
       [&](absl::string_view v) -> absl::Status {
         options.read_direct = std::string(v);
         return absl::OkStatus();
       }},
      {"--seed",
       [&](absl::string_view v) -> absl::Status {
         if (!absl::SimpleAtoi(v, &options.seed)) return BadValue("--seed", v, "an unsigned integer");
         return absl::OkStatus();
       }},
  };
  struct IntOption {
    int64_t* target;
    int64_t min;
    int64_t max;
    bool* given;
  };
  const std::map<std::string, IntOption> int_options = {
      {"--hidden", {&options.hidden, 1, 1 << 20, &hidden_given}},
      {"--layers", {&options.layers, 1, 1000, &layers_given}},
      {"--batch-size", {&options.batch_size, 1, 1 << 20, nullptr}},
      {"--steps", {&options.steps, 1, 1'000'000'000, nullptr}},
      {"--warmup", {&options.warmup, 0, 1'000'000'000, nullptr}},
      {"--workers", {&options.workers, 0, 256, nullptr}},
      {"--prefetch-factor", {&options.prefetch_factor, 1, 64, nullptr}},
      {"--preprocess-us", {&options.preprocess_us, 0, 10'000'000, nullptr}},
      {"--read-kib", {&options.read_kib, 4, 1 << 20, nullptr}},
      {"--threads", {&options.threads, 0, 1024, nullptr}},
  };
  const std::map<std::string, bool*> flags = {
      {"--pin-memory", &options.pin_memory},
      {"--non-blocking", &options.non_blocking},
      {"--copy-stream", &options.copy_stream},
      {"--cuda-graph", &options.cuda_graph},
      {"--help", &options.help},
  };
  bool no_nvtx = false;

  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool has_inline_value = false;
    if (size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    if (name == "--no-nvtx") {
      if (has_inline_value) return absl::InvalidArgumentError("--no-nvtx takes no value");
      no_nvtx = true;
      continue;
    }
    if (auto flag = flags.find(name); flag != flags.end()) {
      if (has_inline_value) {
        return absl::InvalidArgumentError(absl::StrCat(name, " takes no value"));
      }
      *flag->second = true;
      continue;
    }
    const bool is_value_option = value_options.count(name) > 0 || int_options.count(name) > 0;
    if (!is_value_option) {
      if (name.rfind("-", 0) == 0) {
        return absl::InvalidArgumentError(absl::StrCat("unknown option ", name));
      }
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", name, "'"));
    }
    if (!has_inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      }
      value = args[++i];
    }
    if (auto handler = value_options.find(name); handler != value_options.end()) {
      if (absl::Status status = handler->second(value); !status.ok()) return status;
    } else {
      const IntOption& spec = int_options.at(name);
      absl::StatusOr<int64_t> parsed = ParseInt(name, value, spec.min, spec.max);
      if (!parsed.ok()) return parsed.status();
      *spec.target = *parsed;
      if (spec.given != nullptr) *spec.given = true;
    }
  }
  options.nvtx = !no_nvtx;
  if (options.help) return options;

  // Cross-option checks, in the order a user is most likely to hit them.
  if (options.warmup >= options.steps) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--warmup (%d) must be smaller than --steps (%d): no step would be measured",
        options.warmup, options.steps));
  }
  if (options.device == DeviceKind::kCpu) {
    for (const auto& [flag, set] : std::vector<std::pair<const char*, bool>>{
             {"--pin-memory", options.pin_memory},
             {"--non-blocking", options.non_blocking},
             {"--copy-stream", options.copy_stream},
             {"--cuda-graph", options.cuda_graph}}) {
      if (set) return absl::InvalidArgumentError(absl::StrCat(flag, " needs --device cuda"));
    }
  }
  if (options.cuda_graph && options.warmup < kCudaGraphEagerIterations + 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--cuda-graph needs --warmup >= %d (%d eager steps, then the capture step)",
        kCudaGraphEagerIterations + 1, kCudaGraphEagerIterations));
  }
  if (!options.mnist_dir.empty() && (options.image.channels != 1 || options.image.height != 28 ||
                                     options.image.width != 28)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mnist images are 1x28x28; drop --image-size ", ImageShapeString(options.image)));
  }
  switch (options.model) {
    case ModelKind::kTiny:
      if (hidden_given || layers_given) {
        return absl::InvalidArgumentError(
            "--hidden and --layers do not apply to --model tiny (one linear layer)");
      }
      break;
    case ModelKind::kMlp:
      if (!hidden_given) options.hidden = kMlpDefaultHidden;
      if (!layers_given) options.layers = kMlpDefaultLayers;
      break;
    case ModelKind::kCnn:
      if (!hidden_given) options.hidden = kCnnDefaultWidth;
      if (!layers_given) options.layers = kCnnDefaultBlocks;
      if (options.hidden > 4096) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--hidden %d is too wide for --model cnn (base width; at most 4096)", options.hidden));
      }
      break;
  }
  return options;
}

}  // namespace gpuos::trainer
