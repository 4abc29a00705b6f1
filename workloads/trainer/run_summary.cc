// See run_summary.h.
#include "run_summary.h"

#include "absl/strings/str_format.h"

namespace gpuos::trainer {

std::string FormatSummaryLine(const TrainerOptions& options, const TrainingResult& result) {
  return absl::StrFormat(
      "gpuos-trainer: model=%s device=%s workers=%d batch=%d steps=%d warmup=%d "
      "samples_per_s=%.2f steps_per_s=%.3f measured_steps=%d elapsed_s=%.6f get_batch_s=%.6f "
      "hidden=%d layers=%d params=%d image=%s data=%s preprocess_us=%d read_direct_kib=%d prefetch=%d "
      "pin_memory=%d non_blocking=%d copy_stream=%d cuda_graph=%d amp=%s threads=%d seed=%d "
      "loss=%.6f",
      ModelName(options.model), DeviceName(options.device), options.workers, options.batch_size,
      options.steps, options.warmup, result.samples_per_s, result.steps_per_s,
      options.measured_steps(), result.elapsed_s, result.get_batch_s, options.hidden,
      options.layers, result.parameters, ImageShapeString(options.image),
      options.mnist_dir.empty() ? "synthetic" : "mnist", options.preprocess_us,
      options.read_direct.empty() ? 0 : options.read_kib,
      options.prefetch_factor, options.pin_memory, options.non_blocking, options.copy_stream,
      options.cuda_graph, AmpName(options.amp), result.threads, options.seed, result.final_loss);
}

}  // namespace gpuos::trainer
