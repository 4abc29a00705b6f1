// gpuos-trainer: a LibTorch training job whose data pipeline and transfer
// options can be switched one at a time, so that gpuos-trace (and Nsight
// Systems) can show what each costs the OS and the GPU.  Order matters:
// options are checked and data workers forked before LibTorch runs any
// operation or starts any thread.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad options or data
// directory, 128+N after signal N (the data workers are torn down first).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "batch_loader.h"
#include "nvtx_range.h"
#include "batch_source.h"
#include "mnist_reader.h"
#include "run_summary.h"
#include "shutdown_signal.h"
#include "trainer_options.h"
#include "training_loop.h"
#include "worker_pool.h"

namespace gpuos::trainer {
namespace {

constexpr int kExitRuntimeError = 1;
constexpr int kExitUsage = 2;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gpuos-trainer: %s\n", message.c_str());
  return code;
}

int Main(int argc, char** argv) {
  absl::StatusOr<TrainerOptions> options =
      ParseTrainerOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::fprintf(stderr, "gpuos-trainer: %s\n\n%s", std::string(options.status().message()).c_str(),
                 TrainerUsage().c_str());
    return kExitUsage;
  }
  if (options->help) {
    std::fputs(TrainerUsage().c_str(), stdout);
    return 0;
  }
  InstallShutdownHandlers();
  NvtxEnabled() = options->nvtx;

  std::optional<MnistData> mnist;
  if (!options->mnist_dir.empty()) {
    absl::StatusOr<MnistData> read = ReadMnist(options->mnist_dir);
    if (!read.ok()) return Fail(kExitUsage, std::string(read.status().message()));
    mnist = std::move(*read);
  }
  std::optional<StorageReads> reads;
  if (!options->read_direct.empty()) {
    absl::StatusOr<StorageReads> opened = StorageReads::Open(options->read_direct, options->read_kib);
    if (!opened.ok()) return Fail(kExitUsage, std::string(opened.status().message()));
    reads.emplace(std::move(*opened));
  }
  const BatchSource source(*options, mnist ? &*mnist : nullptr, reads ? &*reads : nullptr);

  std::unique_ptr<BatchLoader> loader;
  if (options->workers > 0) {
    WorkerPoolOptions pool_options;
    pool_options.workers = options->workers;
    pool_options.prefetch_factor = options->prefetch_factor;
    pool_options.total_batches = options->steps;
    pool_options.cancelled = &ShutdownRequested;
    absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Start(source, pool_options);
    if (!pool.ok()) return Fail(kExitRuntimeError, std::string(pool.status().message()));
    loader = std::move(*pool);
    // Tools that attribute time to the data workers find them here (their
    // comm is gpuos-data-N as well).
    std::fprintf(stderr, "gpuos-trainer: pid %d, data worker pids %s\n", getpid(),
                 absl::StrJoin(loader->worker_pids(), ",").c_str());
  } else {
    loader = std::make_unique<InlineLoader>(source);
  }

  absl::StatusOr<TrainingResult> result = RunTraining(*options, *loader);
  const absl::Status shutdown = loader->Shutdown();
  loader.reset();

  if (int signo = ShutdownSignal(); signo != 0) {
    const std::string what = result.ok() ? absl::StrCat("interrupted by ", strsignal(signo))
                                         : std::string(result.status().message());
    return Fail(128 + signo, absl::StrCat(what, "; data workers stopped"));
  }
  if (!result.ok()) return Fail(kExitRuntimeError, std::string(result.status().message()));
  if (!shutdown.ok()) return Fail(kExitRuntimeError, std::string(shutdown.message()));
  std::printf("%s\n", FormatSummaryLine(*options, *result).c_str());
  return 0;
}

}  // namespace
}  // namespace gpuos::trainer

int main(int argc, char** argv) { return gpuos::trainer::Main(argc, argv); }
