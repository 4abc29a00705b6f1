// See models.h.  Everything is built from stock torch::nn modules, which
// exist unchanged from LibTorch 1.13 to 2.x.
#include "models.h"

#include <algorithm>

#include "batch_source.h"

namespace gpuos::trainer {
namespace {

namespace nn = torch::nn;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// ResNet's basic block: two 3x3 convolutions with batch norm and a
// shortcut, projected (1x1 conv) when the shape changes.
class ResidualBlockImpl : public nn::Module {
 public:
  ResidualBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv(in, out, 3, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", Conv(out, out, 3, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(out))) {
    if (in != out || stride != 1) {
      projection_ = register_module(
          "projection", nn::Sequential(Conv(in, out, 1, stride), nn::BatchNorm2d(out)));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    torch::Tensor shortcut = projection_ ? projection_->forward(x) : x;
    return torch::relu(y + shortcut);
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Sequential projection_{nullptr};
};
TORCH_MODULE(ResidualBlock);

nn::Sequential BuildTiny(const TrainerOptions& options) {
  return nn::Sequential(nn::Flatten(), nn::Linear(options.image.elements(), kNumClasses),
                        nn::ReLU());
}

nn::Sequential BuildMlp(const TrainerOptions& options) {
  nn::Sequential net;
  net->push_back(nn::Flatten());
  int64_t in = options.image.elements();
  for (int64_t i = 0; i < options.layers; ++i) {
    net->push_back(nn::Linear(in, options.hidden));
    net->push_back(nn::ReLU());
    in = options.hidden;
  }
  net->push_back(nn::Linear(in, kNumClasses));
  return net;
}

nn::Sequential BuildCnn(const TrainerOptions& options) {
  const int64_t width = options.hidden;
  nn::Sequential net;
  // ImageNet-sized inputs get ResNet's downsampling stem; MNIST-sized ones
  // would shrink to nothing with it.
  const bool large_input = std::min(options.image.height, options.image.width) >= 64;
  net->push_back(Conv(options.image.channels, width, 3, large_input ? 2 : 1));
  net->push_back(nn::BatchNorm2d(width));
  net->push_back(nn::ReLU());
  if (large_input) {
    net->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  }
  int64_t in = width;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const int64_t out = width << stage;
    for (int64_t block = 0; block < options.layers; ++block) {
      const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      net->push_back(ResidualBlock(in, out, stride));
      in = out;
    }
  }
  net->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
  net->push_back(nn::Flatten());
  net->push_back(nn::Linear(in, kNumClasses));
  return net;
}

}  // namespace

BuiltModel BuildModel(const TrainerOptions& options) {
  BuiltModel built;
  switch (options.model) {
    case ModelKind::kTiny: built.net = BuildTiny(options); break;
    case ModelKind::kMlp: built.net = BuildMlp(options); break;
    case ModelKind::kCnn: built.net = BuildCnn(options); break;
  }
  for (const torch::Tensor& p : built.net->parameters()) built.parameters += p.numel();
  return built;
}

}  // namespace gpuos::trainer
