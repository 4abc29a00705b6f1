// See worker_pool.h.  Shared region layout (one anonymous MAP_SHARED
// mapping, created before fork so every worker inherits it):
//   [SharedHeader][SlotControl x num_slots][page-aligned slot data x num_slots]
// and each slot's data is [images: B*C*H*W floats][labels: B int64].
#include "worker_pool.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "absl/strings/str_format.h"

namespace gpuos::trainer {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kCacheLine = 64;
// How long Next() sleeps on a slot before checking signals and workers.
constexpr long kPollNanos = 100'000'000;
// How long Shutdown() lets workers leave on their own before SIGKILL.
constexpr int64_t kShutdownGraceNanos = 2'000'000'000;
// Exit codes of a worker that could not do its job (seen by CheckWorkers).
constexpr int kWorkerExitOrphaned = 3;
constexpr int kWorkerExitSemaphore = 4;

size_t RoundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string DescribeExit(int64_t worker, pid_t pid, int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrFormat("data worker %d (pid %d) was killed by signal %d (%s)", worker, pid,
                           WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return absl::StrFormat("data worker %d (pid %d) exited with status %d", worker, pid,
                         WEXITSTATUS(status));
}

bool ExitedCleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace

WorkerPool::WorkerPool(const BatchSource& source, const WorkerPoolOptions& options)
    : source_(source), options_(options) {}

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Start(const BatchSource& source,
                                                              const WorkerPoolOptions& options) {
  if (options.workers < 1 || options.prefetch_factor < 1) {
    return absl::InvalidArgumentError("a worker pool needs at least one worker and one slot each");
  }
  std::unique_ptr<WorkerPool> pool(new WorkerPool(source, options));
  if (absl::Status status = pool->MapSharedRegion(); !status.ok()) return status;
  if (absl::Status status = pool->ForkWorkers(); !status.ok()) return status;
  return pool;
}

absl::Status WorkerPool::MapSharedRegion() {
  num_slots_ = options_.workers * options_.prefetch_factor;
  const size_t image_bytes =
      static_cast<size_t>(source_.batch_size() * source_.sample_elements()) * sizeof(float);
  const size_t label_bytes = static_cast<size_t>(source_.batch_size()) * sizeof(int64_t);
  slot_bytes_ = RoundUp(RoundUp(image_bytes, kCacheLine) + label_bytes, kPageBytes);
  const size_t control_bytes =
      RoundUp(sizeof(SharedHeader), kCacheLine) + num_slots_ * RoundUp(sizeof(SlotControl), kCacheLine);
  data_offset_ = RoundUp(control_bytes, kPageBytes);
  region_bytes_ = data_offset_ + num_slots_ * slot_bytes_;

  void* region = mmap(nullptr, region_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
  if (region == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot map %d MiB of shared batch slots (%d workers x %d prefetch): %s",
        region_bytes_ >> 20, options_.workers, options_.prefetch_factor, std::strerror(errno)));
  }
  region_ = static_cast<char*>(region);
  header_ = new (region_) SharedHeader;
  header_->stop.store(0);
  for (int64_t i = 0; i < num_slots_; ++i) {
    SlotControl& control = slot(i);
    control.batch_index = -1;
    // pshared = 1: the semaphore lives in shared memory and is used across
    // processes; glibc implements it with a futex word in place.
    if (sem_init(&control.filled, 1, 0) != 0 || sem_init(&control.empty, 1, 1) != 0) {
      return absl::InternalError(absl::StrFormat("sem_init: %s", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

WorkerPool::SlotControl& WorkerPool::slot(int64_t i) const {
  char* controls = region_ + RoundUp(sizeof(SharedHeader), kCacheLine);
  return *reinterpret_cast<SlotControl*>(controls + i * RoundUp(sizeof(SlotControl), kCacheLine));
}

float* WorkerPool::slot_images(int64_t i) const {
  return reinterpret_cast<float*>(region_ + data_offset_ + i * slot_bytes_);
}

int64_t* WorkerPool::slot_labels(int64_t i) const {
  const size_t image_bytes =
      static_cast<size_t>(source_.batch_size() * source_.sample_elements()) * sizeof(float);
  return reinterpret_cast<int64_t*>(region_ + data_offset_ + i * slot_bytes_ +
                                    RoundUp(image_bytes, kCacheLine));
}

absl::Status WorkerPool::ForkWorkers() {
  const pid_t parent = getpid();
  // Anything still buffered would otherwise be written once per process.
  std::fflush(stdout);
  std::fflush(stderr);
  for (int64_t w = 0; w < options_.workers; ++w) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      (void)Shutdown();
      return absl::ResourceExhaustedError(
          absl::StrFormat("cannot fork data worker %d: %s", w, std::strerror(err)));
    }
    if (pid == 0) WorkerMain(w, parent);
    Worker worker;
    worker.pid = pid;
    workers_.push_back(worker);
  }
  return absl::OkStatus();
}

void WorkerPool::WorkerMain(int64_t worker_index, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kWorkerExitOrphaned);  // the trainer died before prctl
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);
  char name[16];
  std::snprintf(name, sizeof(name), "gpuos-data-%d", static_cast<int>(worker_index));
  prctl(PR_SET_NAME, name);

  const int64_t n = options_.workers;
  const int64_t p = options_.prefetch_factor;
  for (int64_t k = 0;; ++k) {
    const int64_t batch_index = worker_index + k * n;
    if (batch_index >= options_.total_batches) break;
    const int64_t s = worker_index * p + k % p;
    SlotControl& control = slot(s);
    while (sem_wait(&control.empty) != 0) {
      if (errno != EINTR) _exit(kWorkerExitSemaphore);
    }
    if (header_->stop.load() != 0) break;
    if (!source_.Fill(batch_index, slot_images(s), slot_labels(s), &header_->stop)) break;
    control.batch_index = batch_index;
    sem_post(&control.filled);
  }
  // _exit: the trainer's atexit handlers and static destructors (LibTorch's
  // among them) belong to the trainer, not to this copy of it.
  _exit(0);
}

absl::StatusOr<HostBatch> WorkerPool::Next() {
  if (shut_down_) return absl::FailedPreconditionError("the data workers were shut down");
  if (next_index_ >= options_.total_batches) {
    return absl::OutOfRangeError(absl::StrFormat(
        "asked for batch %d but the workers were told to make %d", next_index_,
        options_.total_batches));
  }
  const int64_t batch_index = next_index_;
  const int64_t n = options_.workers;
  const int64_t p = options_.prefetch_factor;
  const int64_t worker_index = batch_index % n;
  const int64_t s = worker_index * p + (batch_index / n) % p;
  SlotControl& control = slot(s);
  while (true) {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += kPollNanos;
    if (deadline.tv_nsec >= 1'000'000'000) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1'000'000'000;
    }
    if (sem_timedwait(&control.filled, &deadline) == 0) break;
    if (errno != EINTR && errno != ETIMEDOUT) {
      return absl::InternalError(absl::StrFormat("sem_timedwait: %s", std::strerror(errno)));
    }
    if (options_.cancelled != nullptr && options_.cancelled()) {
      return absl::CancelledError("interrupted while waiting for a batch");
    }
    if (absl::Status status = CheckWorkers(); !status.ok()) return status;
    if (workers_[worker_index].reaped) {
      // Exited cleanly yet never filled the slot: the slot protocol is broken.
      return absl::InternalError(absl::StrFormat(
          "data worker %d exited without producing batch %d", worker_index, batch_index));
    }
  }
  if (control.batch_index != batch_index) {
    return absl::InternalError(absl::StrFormat("slot %d holds batch %d, expected batch %d", s,
                                               control.batch_index, batch_index));
  }
  ++next_index_;
  HostBatch batch;
  batch.index = batch_index;
  batch.images = slot_images(s);
  batch.labels = slot_labels(s);
  batch.slot = static_cast<int>(s);
  return batch;
}

void WorkerPool::Release(const HostBatch& batch) {
  if (batch.slot >= 0 && batch.slot < num_slots_) sem_post(&slot(batch.slot).empty);
}

absl::Status WorkerPool::CheckWorkers() {
  for (size_t w = 0; w < workers_.size(); ++w) {
    Worker& worker = workers_[w];
    if (worker.reaped) continue;
    int status = 0;
    const pid_t r = waitpid(worker.pid, &status, WNOHANG);
    if (r == worker.pid) {
      worker.reaped = true;
      worker.wait_status = status;
      if (!ExitedCleanly(status)) {
        return absl::UnavailableError(DescribeExit(static_cast<int64_t>(w), worker.pid, status));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status WorkerPool::Shutdown() {
  if (shut_down_ || header_ == nullptr) return absl::OkStatus();
  shut_down_ = true;
  header_->stop.store(1);
  // Wake workers blocked on a full slot so that they see `stop`.
  for (int64_t i = 0; i < num_slots_; ++i) sem_post(&slot(i).empty);

  absl::Status first_failure = absl::OkStatus();
  const int64_t deadline = MonotonicNanos() + kShutdownGraceNanos;
  while (true) {
    bool all_reaped = true;
    for (size_t w = 0; w < workers_.size(); ++w) {
      Worker& worker = workers_[w];
      if (worker.reaped) continue;
      int status = 0;
      if (waitpid(worker.pid, &status, WNOHANG) == worker.pid) {
        worker.reaped = true;
        worker.wait_status = status;
        if (!ExitedCleanly(status) && first_failure.ok()) {
          first_failure =
              absl::UnavailableError(DescribeExit(static_cast<int64_t>(w), worker.pid, status));
        }
      } else {
        all_reaped = false;
      }
    }
    if (all_reaped) break;
    if (MonotonicNanos() >= deadline) {
      for (Worker& worker : workers_) {
        if (worker.reaped) continue;
        kill(worker.pid, SIGKILL);
        int status = 0;
        while (waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
        }
        worker.reaped = true;
        worker.wait_status = status;
      }
      break;
    }
    usleep(2000);
  }
  return first_failure;
}

std::vector<pid_t> WorkerPool::worker_pids() const {
  std::vector<pid_t> pids;
  for (const Worker& worker : workers_) pids.push_back(worker.pid);
  return pids;
}

WorkerPool::~WorkerPool() {
  (void)Shutdown();
  if (region_ != nullptr) {
    for (int64_t i = 0; i < num_slots_; ++i) {
      sem_destroy(&slot(i).filled);
      sem_destroy(&slot(i).empty);
    }
    munmap(region_, region_bytes_);
  }
}

}  // namespace gpuos::trainer
