// Processes that ran a training loop of their own, in a trace that names no
// ranks: hogwild training (torch.multiprocessing processes updating one
// model in shared memory, as PyTorch's mnist_hogwild example does), trials
// of a sweep run side by side, models of an ensemble trained in parallel --
// or the ranks of a distributed job started without torchrun's variables
// and without the Python hook, which the trace cannot name.  The step
// analysis of the whole trace follows one of them; each gets its own
// analysis beside the ranks' (rank_analysis.h), so that no loop is left
// out unsaid.
//
// A process trains when it has at least kMinTrainingMarks of one kind of
// training mark: the Python hook's optimizer.step or autograd.backward
// ranges, or the uprobe's backward marks (step_options.h).  DataLoader
// workers and evaluation processes run no backward pass, so they are not
// counted.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "gpuos_trace.pb.h"

namespace gpuos {

inline constexpr uint64_t kMinTrainingMarks = 3;

class TrainingMarkCounter {
 public:
  void Add(const v1::Event& e);

  // The training processes, by pid, when there are at least two; empty
  // otherwise (one loop is the step analysis' own).
  std::vector<uint32_t> TrainingProcesses() const;

 private:
  struct Marks {
    uint64_t optimizer_steps = 0;
    uint64_t backward_ranges = 0;
    uint64_t backward_uprobes = 0;
  };
  std::map<uint32_t, Marks> by_pid_;
};

}  // namespace gpuos
