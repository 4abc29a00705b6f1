// The ranks of a distributed job in a trace, each analyzed on its own.
// A rank is a process whose RankInfo (recorded from its environment at
// exec or attach) names a rank, and whose ancestors in the trace carry no
// RankInfo with the same host and rank: children that inherited the
// environment (data workers, compile workers, a re-exec) belong to it.
// Each rank with the processes under it gets its own step analysis
// (step_analysis.h: its driving thread, workers and steps), diagnosis,
// and communication (communication.h); the straggler (straggler.h) is
// chosen among them.  A trace with no RankInfo has no ranks; its processes
// that trained on their own (training_processes.h) are analyzed the same
// way, as training processes, with no straggler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/communication.h"
#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "analysis/step_options.h"
#include "analysis/straggler.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

struct RankSummary {
  v1::RankInfo info;
  uint32_t pid = 0;
  std::vector<uint32_t> pids;  // the rank process and those under it, sorted
  // The device of its kernels (the lowest when several), else the first
  // entry of CUDA_VISIBLE_DEVICES when it is a number; unset otherwise.
  std::optional<uint32_t> gpu;
  StepAnalysis steps;
  Diagnosis diagnosis;
  CommunicationAnalysis comm;
  // Over the measured steps.
  uint64_t comm_ns = 0;
  uint64_t exposed_comm_ns = 0;
  bool has_gpu_work = false;

  int32_t rank() const { return info.has_rank() ? info.rank() : -1; }
  double PerStep(uint64_t total) const {
    return steps.measured_steps ? static_cast<double>(total) / steps.measured_steps : 0;
  }
};

struct RankAnalysis {
  std::vector<RankSummary> ranks;  // by rank, then pid
  // Without ranks, at least two processes that ran training loops of their
  // own, by pid (their `info` is empty); none otherwise.
  std::vector<RankSummary> training_processes;
  // Whether they ran collectives (comm threads, NCCL kernels): ranks of a
  // distributed job the trace cannot name, rather than independent loops.
  bool training_processes_communicate = false;
  std::optional<Straggler> straggler;
  // Why no straggler could be judged (StragglerNotJudged), or empty.
  std::string straggler_not_judged;
  // Why none was named where one rank waited least on average but the
  // ranks took turns holding each other back (FindStraggler), or empty.
  std::string straggler_turns;
  std::string read_error;  // the first per-rank analysis error, if any
  // Set when the ranks' step counts disagree (by more than
  // kRankStepCountSpread) while their steps were inferred from the work
  // (no marks): in a synchronous job every rank takes the same steps, so
  // the inference split or merged some.
  std::string note;
};

inline constexpr double kRankStepCountSpread = 0.2;
// Training processes that spend at least this share of their steps in
// collectives (gloo's, from their waits) run collectives between them.
inline constexpr double kMinCollectiveShare = 0.02;
// Each rank costs two passes over the file: beyond this many, the lowest
// ranks are analyzed and the note says how many were left out.
inline constexpr size_t kMaxRanksAnalyzed = 256;

absl::StatusOr<RankAnalysis> AnalyzeRanks(const std::string& path, const StepOptions& options);

// The same over events in memory (tests): the per-rank step analyses run
// over `events` filtered by process.
absl::StatusOr<RankAnalysis> AnalyzeRankEvents(const v1::TraceHeader& header, const std::vector<v1::Event>& events,
                                               const StepOptions& options);

}  // namespace gpuos
