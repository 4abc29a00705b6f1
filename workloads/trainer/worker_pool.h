// --workers N: N forked data worker processes, like PyTorch's DataLoader
// with num_workers=N.  Worker w fills batches w, w+N, w+2N, ... into its own
// prefetch_factor slots of one MAP_SHARED region; each slot has two
// process-shared semaphores ("filled", "empty") beside it, so handing a
// batch over costs a futex wake and no copy.
//
// Start() must run before LibTorch creates any thread: fork() copies only
// the calling thread, and a thread pool's locks would be left held in the
// child.  Workers never call into LibTorch.
//
// Lifetime: workers exit by themselves once they have filled their share of
// `total_batches`; Shutdown() asks the rest to stop, waits, and SIGKILLs
// stragglers.  PR_SET_PDEATHSIG kills them if the trainer dies first, and
// they ignore SIGINT so that a Ctrl-C at the terminal (sent to the whole
// process group) is handled by the trainer, which tears them down.
#pragma once

#include <semaphore.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "batch_loader.h"
#include "batch_source.h"

namespace gpuos::trainer {

struct WorkerPoolOptions {
  int64_t workers = 1;
  int64_t prefetch_factor = 2;
  int64_t total_batches = 0;  // batches 0 .. total_batches-1 will be asked for
  // Polled while Next() waits; true makes it return Cancelled.
  bool (*cancelled)() = nullptr;
};

class WorkerPool : public BatchLoader {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Start(const BatchSource& source,
                                                           const WorkerPoolOptions& options);
  ~WorkerPool() override;

  absl::StatusOr<HostBatch> Next() override;
  void Release(const HostBatch& batch) override;
  absl::Status Shutdown() override;
  std::vector<pid_t> worker_pids() const override;

 private:
  struct SlotControl {
    sem_t filled;  // posted by the worker when the batch is in the slot
    sem_t empty;   // posted by the trainer when it is done with the slot
    int64_t batch_index;
  };
  struct SharedHeader {
    std::atomic<int32_t> stop;
  };
  struct Worker {
    pid_t pid = -1;
    bool reaped = false;
    int wait_status = 0;
  };

  WorkerPool(const BatchSource& source, const WorkerPoolOptions& options);
  absl::Status MapSharedRegion();
  absl::Status ForkWorkers();
  [[noreturn]] void WorkerMain(int64_t worker_index, pid_t parent);
  // Reaps workers that have exited; an error if one failed or was killed.
  absl::Status CheckWorkers();

  SlotControl& slot(int64_t i) const;
  float* slot_images(int64_t i) const;
  int64_t* slot_labels(int64_t i) const;

  const BatchSource& source_;
  WorkerPoolOptions options_;
  int64_t num_slots_ = 0;
  size_t slot_bytes_ = 0;
  size_t data_offset_ = 0;
  size_t region_bytes_ = 0;
  char* region_ = nullptr;
  SharedHeader* header_ = nullptr;
  std::vector<Worker> workers_;
  int64_t next_index_ = 0;
  bool shut_down_ = false;
};

}  // namespace gpuos::trainer
