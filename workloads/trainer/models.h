// The three model families of the study, from "kernel dispatch dominates"
// to "compute dominates":
//   tiny  one Linear + ReLU, the proposal's base case;
//   mlp   Flatten, then --layers Linear+ReLU of width --hidden, then the
//         classifier (7 x 8192 reaches the practical guide's ~400M
//         parameters at 1x28x28);
//   cnn   a small ResNet: conv stem, three stages of basic residual blocks
//         (widths w, 2w, 4w; --layers blocks each), global pool, Linear.
#pragma once

#include <torch/torch.h>

#include <string>

#include "trainer_options.h"

namespace gpuos::trainer {

struct BuiltModel {
  torch::nn::Sequential net;
  int64_t parameters = 0;
};

// Weights come from LibTorch's default generator: seed it first.
BuiltModel BuildModel(const TrainerOptions& options);

}  // namespace gpuos::trainer
