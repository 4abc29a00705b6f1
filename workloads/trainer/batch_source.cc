// See batch_source.h.  Synthetic samples are uniform noise plus a bright
// band whose position is the label, so that the models can actually learn
// (a falling loss shows the optimizer step really ran).
#include "batch_source.h"

#include <time.h>

#include <algorithm>
#include <random>

namespace gpuos::trainer {
namespace {

// splitmix64: a per-sample seed from (run seed, sample index).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// xorshift64*: cheap enough that --preprocess-us, not the generator,
// decides how much CPU a sample costs.
struct FastRandom {
  uint64_t state;
  uint64_t Next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dULL;
  }
  // Uniform in [-1, 1).
  float NextSigned() { return static_cast<float>(Next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }
};

int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// MNIST's published mean and standard deviation, as torchvision normalizes.
constexpr float kMnistMean = 0.1307f;
constexpr float kMnistStd = 0.3081f;

}  // namespace

BatchSource::BatchSource(const TrainerOptions& options, const MnistData* mnist, const StorageReads* reads)
    : batch_size_(options.batch_size),
      image_(options.image),
      preprocess_ns_(options.preprocess_us * 1000),
      seed_(options.seed),
      mnist_(mnist),
      reads_(reads) {
  if (mnist_ != nullptr) {
    mnist_order_.resize(mnist_->count);
    for (size_t i = 0; i < mnist_order_.size(); ++i) mnist_order_[i] = static_cast<uint32_t>(i);
    std::mt19937_64 rng(seed_);
    std::shuffle(mnist_order_.begin(), mnist_order_.end(), rng);
  }
}

bool BatchSource::Fill(int64_t batch_index, float* images, int64_t* labels,
                       const std::atomic<int32_t>* cancel) const {
  const int64_t elements = sample_elements();
  for (int64_t j = 0; j < batch_size_; ++j) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed) != 0) return false;
    const int64_t sample_index = batch_index * batch_size_ + j;
    float* image = images + j * elements;
    if (mnist_ != nullptr) {
      FillMnist(sample_index, image, &labels[j]);
    } else {
      FillSynthetic(sample_index, image, &labels[j]);
    }
    // A failed read cost what it cost; the sample does not depend on it.
    if (reads_ != nullptr) (void)reads_->ReadSample(sample_index);
    if (preprocess_ns_ > 0) BurnCpu(image);
  }
  return true;
}

void BatchSource::FillSynthetic(int64_t sample_index, float* image, int64_t* label) const {
  FastRandom rng{Mix(seed_ ^ Mix(static_cast<uint64_t>(sample_index))) | 1};
  const int64_t elements = sample_elements();
  const int64_t cls = static_cast<int64_t>(rng.Next() % kNumClasses);
  for (int64_t i = 0; i < elements; ++i) image[i] = rng.NextSigned();
  const int64_t band_begin = cls * elements / kNumClasses;
  const int64_t band_end = (cls + 1) * elements / kNumClasses;
  for (int64_t i = band_begin; i < band_end; ++i) image[i] += 1.0f;
  *label = cls;
}

void BatchSource::FillMnist(int64_t sample_index, float* image, int64_t* label) const {
  const int64_t row = mnist_order_[sample_index % mnist_->count];
  const int64_t elements = sample_elements();
  const uint8_t* pixels = mnist_->pixels.data() + row * elements;
  for (int64_t i = 0; i < elements; ++i) {
    image[i] = (static_cast<float>(pixels[i]) / 255.0f - kMnistMean) / kMnistStd;
  }
  *label = mnist_->labels[row];
}

void BatchSource::BurnCpu(const float* image) const {
  // Read-only passes over the sample until the CPU budget is spent: the
  // cost is CPU time, so a worker that is preempted does not get its work
  // for free, and the sample itself stays deterministic.
  const int64_t elements = sample_elements();
  const int64_t deadline = ThreadCpuNanos() + preprocess_ns_;
  volatile float sink = 0;
  float acc = 0;
  do {
    for (int64_t i = 0; i < elements && i < 4096; ++i) acc = acc * 0.999f + image[i];
    sink = acc;
  } while (ThreadCpuNanos() < deadline);
  (void)sink;
}

}  // namespace gpuos::trainer
