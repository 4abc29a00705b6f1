// Reads MNIST's training set from its idx files (the uncompressed
// train-images-idx3-ubyte / train-labels-idx1-ubyte pair) into memory.
// Plain C++, no LibTorch: it runs before the data workers are forked, and
// they share the bytes copy-on-write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuos::trainer {

inline constexpr char kMnistImagesFile[] = "train-images-idx3-ubyte";
inline constexpr char kMnistLabelsFile[] = "train-labels-idx1-ubyte";

struct MnistData {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major
  std::vector<uint8_t> labels;  // count, each in [0, 9]
};

// Errors name the file and what is wrong with it (missing, gzipped,
// wrong magic number, truncated, counts that disagree).
absl::StatusOr<MnistData> ReadMnist(const std::string& dir);

}  // namespace gpuos::trainer
