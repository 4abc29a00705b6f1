// The training loop: per step, "get batch" (from the loader, optionally
// into pinned memory), "copy batch" (host to device, optionally
// non-blocking and on a copy stream one batch ahead), then "forward",
// "backward", "optimizer step" (or one CUDA graph replay), each an NVTX
// range nested in "step N".  Timing starts after --warmup steps and is
// bracketed by device synchronizations.
#pragma once

#include "absl/status/statusor.h"
#include "batch_loader.h"
#include "run_summary.h"
#include "trainer_options.h"

namespace gpuos::trainer {

// Builds the model and trains for options.steps steps on batches from
// `loader` (batch i on step i).  LibTorch errors come back as Internal;
// a shutdown signal as Cancelled.
absl::StatusOr<TrainingResult> RunTraining(const TrainerOptions& options, BatchLoader& loader);

}  // namespace gpuos::trainer
