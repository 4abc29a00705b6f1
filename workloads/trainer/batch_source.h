// What a data worker does for one batch: produce the samples (synthetic, or
// MNIST), read --read-kib of storage past the page cache (--read-direct)
// and burn --preprocess-us of CPU time per sample, the stand-ins for
// reading, decoding and augmentation.  Batch i has the same content whichever
// process fills it, so a run with --workers 0 and one with --workers N see
// the same data.  No LibTorch here: workers never touch it.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "mnist_reader.h"
#include "storage_reads.h"
#include "trainer_options.h"

namespace gpuos::trainer {

inline constexpr int64_t kNumClasses = 10;

class BatchSource {
 public:
  // `mnist` and `reads` may be null (synthetic data, no storage reads);
  // when set they must outlive this.
  BatchSource(const TrainerOptions& options, const MnistData* mnist, const StorageReads* reads = nullptr);

  int64_t batch_size() const { return batch_size_; }
  const ImageShape& image() const { return image_; }
  int64_t sample_elements() const { return image_.elements(); }

  // Writes batch_size * sample_elements floats and batch_size labels.
  // Returns false, leaving the batch half-filled, when *cancel becomes
  // nonzero (checked between samples).
  bool Fill(int64_t batch_index, float* images, int64_t* labels,
            const std::atomic<int32_t>* cancel = nullptr) const;

 private:
  void FillSynthetic(int64_t sample_index, float* image, int64_t* label) const;
  void FillMnist(int64_t sample_index, float* image, int64_t* label) const;
  void BurnCpu(const float* image) const;

  int64_t batch_size_;
  ImageShape image_;
  int64_t preprocess_ns_;
  uint64_t seed_;
  const MnistData* mnist_;
  const StorageReads* reads_;
  std::vector<uint32_t> mnist_order_;  // a seeded shuffle of the dataset
};

}  // namespace gpuos::trainer
