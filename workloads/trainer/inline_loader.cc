// --workers 0: the main thread loads each batch when the step asks for it,
// PyTorch's num_workers=0.  One buffer is enough because the training loop
// releases a batch before it asks for the next one.
#include "batch_loader.h"

namespace gpuos::trainer {

InlineLoader::InlineLoader(const BatchSource& source)
    : source_(source),
      images_(static_cast<size_t>(source.batch_size() * source.sample_elements())),
      labels_(static_cast<size_t>(source.batch_size())) {}

absl::StatusOr<HostBatch> InlineLoader::Next() {
  HostBatch batch;
  batch.index = next_index_++;
  batch.images = images_.data();
  batch.labels = labels_.data();
  batch.slot = 0;
  source_.Fill(batch.index, batch.images, batch.labels);
  return batch;
}

}  // namespace gpuos::trainer
