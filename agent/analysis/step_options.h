// How `gpuos-trace report` finds training steps and names their parts: the
// NVTX range names that mark a step and a data fetch, and the comm names of
// data-loader workers.  All regexes are ECMAScript, matched case-insensitively
// against the whole name.
#pragma once

#include <cstdint>
#include <string>

namespace gpuos {

// "step", "step 12", "step_12", "Batch 3", "ProfilerStep#5", "iteration 7",
// "iter_7", "train_step", "Training step 4"; cupti_shim/capture_windows.cc
// (IsStepRangeName) matches the same names without a regex.
inline constexpr char kDefaultStepRegex[] =
    R"(^(train(ing)?[ _-]?)?(step|iter(ation)?|batch|ProfilerStep#?)\s*[#_:=-]?\s*\d*$)";
// "get batch" (gpuos-trainer, the Nsight articles), "DataLoader fetch" (the
// Python start-up hook), "fetch batch", "load_batch", "next batch", "data loading".
inline constexpr char kDefaultDataRangeRegex[] =
    R"(^((get|fetch|load|next)[ _-]?(batch|data)|data[ _-]?load(er|ing)?([ _-]?(fetch|next|iter))?)$)";
// PyTorch's "pt_data_worker", gpuos-trainer's "gpuos-data-<i>".
inline constexpr char kDefaultWorkerCommRegex[] = R"(^(pt_data_worker.*|gpuos-data-.*|data[ _-]?worker.*)$)";
// The NVTX domain of the Python start-up hook's ranges (agent/python_hooks).
inline constexpr char kPythonHookDomain[] = "gpuos.python";
// Written by the Python start-up hook (domain "gpuos.python") around each
// optimizer.step() ("optimizer.step#2", ... for a second optimizer and
// more: cupti_shim/optimizer_step_cycle.h); used for steps only when no
// step ranges exist.
inline constexpr char kDefaultOptimizerRangeName[] = "optimizer.step";
// Written by the Python start-up hook around each torch.autograd.backward()
// (loss.backward()); steps between their ends when there are no
// optimizer.step ranges (loops that update the parameters by hand).
inline constexpr char kDefaultBackwardRangeName[] = "autograd.backward";
// The NVTX domain of the backward marks gpuos-trace records itself, from a
// uprobe on the autograd engine (record/torch_backward_probes.h): NVTX
// marks named kDefaultBackwardRangeName at the start of each outermost
// backward pass, in any PyTorch job (C++ or Python, launched or attached,
// with or without the Python hook).
inline constexpr char kBackwardUprobeDomain[] = "gpuos.uprobe";
// The NVTX domain of the step marks the shim sends where it counts steps
// live from the rhythm of the job's CUDA calls, for capture windows in a
// job with no step marks (cupti_shim/live_step_rhythm.h): one mark, named
// after the call, at each step's end.
inline constexpr char kLiveRhythmDomain[] = "gpuos.rhythm";

struct StepOptions {
  std::string step_regex = kDefaultStepRegex;
  std::string data_range_regex = kDefaultDataRangeRegex;
  std::string worker_comm_regex = kDefaultWorkerCommRegex;
  // Exact name (case-sensitive), any domain.
  std::string optimizer_range_name = kDefaultOptimizerRangeName;
  std::string backward_range_name = kDefaultBackwardRangeName;
  // The first `warmup_steps` steps are shown but left out of the summaries
  // and the diagnosis (CUDA context creation, allocator growth, autotuning).
  uint32_t warmup_steps = 1;

  // Without step or optimizer.step ranges: steps from the rhythm of the
  // launching thread's CUDA API calls (api_rhythm.h says the rule).  A name
  // marks steps when it has at least `rhythm_min_calls` calls whose
  // intervals, the longest `rhythm_excused_fraction` of them set aside as
  // pauses, average at least `rhythm_min_interval_ns` with a coefficient of
  // variation of at most `rhythm_max_cv`.
  uint32_t rhythm_min_calls = 5;
  uint64_t rhythm_min_interval_ns = 1'000'000;
  double rhythm_max_cv = 0.25;
  double rhythm_excused_fraction = 0.1;
  // When no name is regular, in attached traces and traces with CUDA calls:
  // steps are fixed windows of this width over the attach window (or the
  // trace), so that per-window breakdowns still show where time went.
  uint64_t fixed_window_ns = 100'000'000;
};

}  // namespace gpuos
