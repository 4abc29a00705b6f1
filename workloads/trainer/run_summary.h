// What a finished run prints: one line of key=value pairs on stdout that
// scripts and gpuos-trace's benchmarks parse, e.g.
//   gpuos-trainer: model=mlp device=cpu workers=2 batch=32 steps=12 warmup=2
//   samples_per_s=... steps_per_s=... <the rest of the configuration>
// Keys never change meaning; new keys go at the end.
#pragma once

#include <cstdint>
#include <string>

#include "trainer_options.h"

namespace gpuos::trainer {

struct TrainingResult {
  int64_t parameters = 0;
  int threads = 0;             // LibTorch intra-op threads actually used
  double elapsed_s = 0;        // measured steps only
  double get_batch_s = 0;      // of which spent in "get batch" (waiting for data)
  double samples_per_s = 0;
  double steps_per_s = 0;
  double final_loss = 0;
};

std::string FormatSummaryLine(const TrainerOptions& options, const TrainingResult& result);

}  // namespace gpuos::trainer
