// Pass 1 over a trace: which thread runs the training loop (the "launching
// thread") and where its steps begin and end, plus which threads are data
// workers.  Steps are NVTX ranges named like a step on the thread that has
// the most of them; without any, the intervals between consecutive
// "optimizer.step" range ends (the Python start-up hook's ranges).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "analysis/step_name_matcher.h"
#include "analysis/step_options.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

enum class StepSource {
  kNone,            // no steps found
  kNvtxRanges,      // NVTX ranges matching StepOptions::step_regex
  kOptimizerSteps,  // between consecutive optimizer.step range ends
};

const char* StepSourceName(StepSource source);

struct StepWindow {
  uint64_t index = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool warmup = false;
};

struct StepPlan {
  StepSource source = StepSource::kNone;
  uint32_t pid = 0;  // the launching thread's process
  uint32_t tid = 0;  // the launching thread
  std::string thread_comm;
  std::vector<StepWindow> steps;  // sorted by start
  // Threads other than the chosen one that also had step ranges (a second
  // rank, a profiler thread): reported, not analyzed.
  uint32_t other_threads_with_steps = 0;
  // Data-loader workers: every thread of a process descended from the
  // launching process, and any thread whose comm ever matched
  // StepOptions::worker_comm_regex (a process whose main thread matched
  // counts whole).
  absl::flat_hash_set<uint32_t> worker_pids;
  absl::flat_hash_set<uint32_t> worker_tids;
  uint32_t worker_processes = 0;  // distinct processes with a worker thread
  bool IsWorker(uint32_t pid, uint32_t tid) const {
    return worker_pids.contains(pid) || worker_tids.contains(tid);
  }
  // Why there are no steps, for the report.
  std::string note;
};

class StepLocator {
 public:
  // Fails when a regex in `options` does not compile.
  static absl::StatusOr<std::unique_ptr<StepLocator>> Create(const StepOptions& options);

  // Events in any order.
  void Add(const v1::Event& event);
  StepPlan Finish();

 private:
  struct Range {
    uint64_t start_ns;
    uint64_t end_ns;
    int64_t number;  // TrailingNumber of the name
  };
  StepLocator(const StepOptions& options, StepNameMatcher step, StepNameMatcher worker)
      : options_(options), step_(std::move(step)), worker_(std::move(worker)) {}
  void SeeComm(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm);

  StepOptions options_;
  StepNameMatcher step_;
  StepNameMatcher worker_;
  // By (pid << 32 | tid).
  absl::flat_hash_map<uint64_t, std::vector<Range>> step_ranges_;
  absl::flat_hash_map<uint64_t, std::vector<Range>> optimizer_ranges_;
  absl::flat_hash_map<uint32_t, uint32_t> parent_;  // pid -> ppid
  // tid -> the comm with the latest timestamp.
  absl::flat_hash_map<uint32_t, std::pair<uint64_t, std::string>> comm_;
  absl::flat_hash_set<uint32_t> named_worker_pids_;
  absl::flat_hash_map<uint32_t, uint32_t> named_worker_tids_;  // tid -> pid
};

}  // namespace gpuos
