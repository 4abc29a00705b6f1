// How the training loop gets host batches, whatever loads them: the main
// thread itself (--workers 0, InlineLoader) or data worker processes
// (--workers N, WorkerPool).  Batches come back in order, 0, 1, 2, ...,
// as from PyTorch's DataLoader.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "batch_source.h"

namespace gpuos::trainer {

// A batch in host memory owned by the loader, valid until Release().
struct HostBatch {
  int64_t index = -1;
  float* images = nullptr;   // batch_size x C x H x W
  int64_t* labels = nullptr; // batch_size
  int slot = -1;             // loader-private
};

class BatchLoader {
 public:
  virtual ~BatchLoader() = default;

  // The next batch, waiting for it if needed.  Cancelled when a shutdown
  // signal arrives while waiting; an error when a worker died.
  virtual absl::StatusOr<HostBatch> Next() = 0;

  // Hands the batch's memory back for reuse.  Exactly once per Next().
  virtual void Release(const HostBatch& batch) = 0;

  // Stops and reaps every worker.  Idempotent.
  virtual absl::Status Shutdown() = 0;

  virtual std::vector<pid_t> worker_pids() const { return {}; }
};

// --workers 0: fills one buffer in the calling thread.
class InlineLoader : public BatchLoader {
 public:
  explicit InlineLoader(const BatchSource& source);

  absl::StatusOr<HostBatch> Next() override;
  void Release(const HostBatch& batch) override {}
  absl::Status Shutdown() override { return absl::OkStatus(); }

 private:
  const BatchSource& source_;
  std::vector<float> images_;
  std::vector<int64_t> labels_;
  int64_t next_index_ = 0;
};

}  // namespace gpuos::trainer
