// Pass 1 over a trace: which thread runs the training loop (the "launching
// thread") and where its steps begin and end, plus which threads are data
// workers.  Steps come from, in this order:
//   1. NVTX ranges named like a step on the thread that has the most of them;
//   2. the intervals between consecutive "optimizer.step" range ends (the
//      Python start-up hook's ranges);
//   3. the intervals between consecutive "autograd.backward" range ends (the
//      Python start-up hook's ranges around loss.backward(), for loops that
//      update by hand);
//   4. the repeating sequence of the GPU work of the launching thread's
//      process (the thread with the most kernel launches): its launches (named by their kernels), copies,
//      memsets and synchronizations across its threads, in call order
//      (repeating_sequence.h);
//   4a. under a capture spec, the step marks the shim sent where it counted
//      steps live from the rhythm of the job's CUDA calls (NVTX marks in the
//      domain kLiveRhythmDomain): the steps its windows were opened on,
//      over the whole run, where CUDA records exist only inside windows;
//   5. the intervals between consecutive starts of backward passes marked
//      by gpuos-trace's own uprobe on the autograd engine (NVTX marks in
//      the domain kBackwardUprobeDomain, record/torch_backward_probes.h),
//      on the thread with the most: any PyTorch job, C++ or Python,
//      launched or attached, without the Python hook;
//   3 and 5 group k backward passes into one step when the CPU work between
//      them has a period of k (gradient accumulation: the interval after
//      every k-th holds the optimizer's update, accumulation_period.h);
//   6. the rhythm of the launching thread's CUDA API calls (the thread with
//      the most kernel launches): one call name that recurs once a step at
//      near-constant intervals (api_rhythm.h);
//   7. without CUDA: the repeating sequence of the main thread's blocking
//      points and memory-map calls in the launched command's process (the
//      first attach target; else the process with the most of them)
//      (cpu_activity_tokens.h);
//   8. in attached traces and traces with CUDA calls, fixed time windows
//      (StepOptions::fixed_window_ns) over the attach window or the trace,
//      so that even an unannotated, irregular job gets per-window numbers.
// Iterations a repeating sequence leaves out (warm-up, an evaluation pass,
// a different last batch) stay steps, contiguous with the others, but are
// marked `left_out` and kept out of the summaries like warm-up steps; so
// are steps from optimizer.step or autograd.backward marks that hold extra
// GPU work, an evaluation pass or checkpoint (step_extra_work.h).
// In an attached trace every step is clipped to the attach window.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "analysis/api_rhythm.h"
#include "analysis/cpu_activity_tokens.h"
#include "analysis/repeating_sequence.h"
#include "analysis/step_name_matcher.h"
#include "analysis/step_options.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

struct StepCpuWork;  // step_extra_work.h

enum class StepSource {
  kNone,            // no steps found
  kNvtxRanges,      // NVTX ranges matching StepOptions::step_regex
  kOptimizerSteps,  // between consecutive optimizer.step range ends
  kApiRhythm,       // between the ends of consecutive calls of one CUDA API name
  kFixedWindows,    // fixed time windows: nothing marks steps
  kBackwardRanges,  // between consecutive autograd.backward range ends
  kRepeatingKernelSequence,  // the repeating unit of the GPU work's sequence
  kRepeatingCpuActivity,     // the repeating unit of the CPU threads' activity
  kBackwardUprobe,           // between consecutive backward-pass starts from the autograd uprobe
  kBackwardGroups,           // groups of k backward passes (marks of 3 or 5), by the period of the CPU work
};

// For programs: "nvtx_step_ranges", "optimizer_step_ranges",
// "backward_ranges", "repeating_kernel_sequence", "cuda_api_rhythm",
// "repeating_cpu_activity", "backward_uprobe", "backward_groups",
// "fixed_windows", "none".
const char* StepSourceName(StepSource source);
// For people: "NVTX step ranges", "optimizer.step ranges", "the rhythm of
// CUDA API calls", "fixed time windows", "nothing"...
const char* StepSourceText(StepSource source);
// Steps found without annotations, whose note says how.
bool StepSourceIsInferred(StepSource source);

// One off-CPU interval of a thread that a thread of another process
// ended (the kernel's waker, trusted: thread_activity.h).
struct LoopWait {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t waker_pid = 0;
};

struct StepWindow {
  uint64_t index = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool warmup = false;
  // Why an iteration is kept out of the summaries (warmup is then set too);
  // empty for a measured step and a plain warm-up step.
  std::string left_out;
};

// The job's worker processes are not a DataLoader's: none of their threads
// is named like its workers (pt_data_worker, from PyTorch 2.3), and the
// Python hook ran but marked no data fetch (vectorized environments in
// subprocesses, a simulator).  Where this is false with unnamed workers and
// no marks, the trace cannot tell, and they count as a DataLoader's.
inline bool WorkersAreNotADataLoaders(uint32_t worker_processes, size_t named_worker_threads, bool python_hook_marks,
                                      bool data_fetch_ranges) {
  return worker_processes > 0 && named_worker_threads == 0 && python_hook_marks && !data_fetch_ranges;
}

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
  // Worker processes alive at once, at most (a DataLoader without
  // persistent_workers starts a new set every epoch), and how many there
  // were in the trace.
  uint32_t worker_processes = 0;
  uint32_t worker_processes_started = 0;
  bool IsWorker(uint32_t pid, uint32_t tid) const {
    return worker_pids.contains(pid) || worker_tids.contains(tid);
  }
  // Why there are no steps, or, for steps found without annotations (see
  // StepSourceIsInferred), how they were found (the repeating unit and the
  // iterations left out and why; the anchor call, its count, mean interval
  // and CV; or why windows were used), for the report.
  std::string note;
  // kApiRhythm from the shim's live marks (source 4a), not the trace's calls.
  bool live_rhythm = false;
  // The trace has NVTX ranges named like a data fetch (on any thread): the
  // time a thread loads data is then told from its other CPU work.
  bool data_fetch_ranges = false;
  // The trace has the Python hook's optimizer.step or autograd.backward
  // ranges: the hook ran, so a DataLoader iterated in the loop would have
  // left data-fetch ranges too.
  bool python_hook_marks = false;
  // An attached trace's window (its end: the trailer's, else the last
  // event); both 0 in a launched trace.
  uint64_t attach_start_ns = 0;
  uint64_t attach_end_ns = 0;
  bool WorkersAreNotADataLoaders() const {
    return gpuos::WorkersAreNotADataLoaders(worker_processes, worker_tids.size(), python_hook_marks,
                                            data_fetch_ranges);
  }
  // Set for kApiRhythm: the anchor call's name (suffixes stripped); for a
  // repeating sequence, the token each step starts with.
  std::string anchor_name;
};

class StepLocator {
 public:
  // Fails when a regex in `options` does not compile.
  static absl::StatusOr<std::unique_ptr<StepLocator>> Create(const StepOptions& options);

  // An attached trace's window (header.attach) and its first target, for
  // clipping and for fixed windows.  Without it the trace counts as
  // launched.
  void SetHeader(const v1::TraceHeader& header);
  // The attach window's end (trailer.attach_end_ns); without it, the last
  // event ends the window.
  void SetTrailer(const v1::TraceTrailer& trailer);

  // Events in any order.
  void Add(const v1::Event& event);
  StepPlan Finish();

 private:
  struct Range {
    uint64_t start_ns;
    uint64_t end_ns;
    int64_t number;  // TrailingNumber of the name
  };
  StepLocator(const StepOptions& options, StepNameMatcher step, StepNameMatcher worker, StepNameMatcher data)
      : options_(options), step_(std::move(step)), worker_(std::move(worker)), data_(std::move(data)) {}
  // CUDA API calls of one thread.
  struct ThreadApi {
    explicit ThreadApi(const StepOptions& options) : rhythm(options) {}
    uint64_t launches = 0;
    uint64_t first_ns = UINT64_MAX;
    ApiRhythm rhythm;
  };
  using RangesByThread = absl::flat_hash_map<uint64_t, std::vector<Range>>;
  void SeeComm(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm);
  // A process's start (its parent, the forking thread) or exit.
  // A GPU record's name, by its process and correlation id (gpu_names_).
  void SeeGpuRecord(const v1::Event& e);
  // A thread's off-CPU interval that another process's thread ended
  // (loop_waits_).
  void SeeLoopWait(const v1::Event& e);
  void SeeProcessLife(const v1::Event& e);
  // The most of `pids` alive at once.
  uint32_t PeakAlive(const absl::flat_hash_set<uint32_t>& pids) const;
  // The thread with the most ranges (ties: the one that starts first).
  static std::pair<uint64_t, std::vector<Range>*> MostRanges(RangesByThread& by_thread);
  // Sources 1 and 2.
  void NvtxRangeSteps(StepPlan& plan);
  void OptimizerSteps(StepPlan& plan);
  // Cuts every step to the attach window.
  void ClipToAttachWindow(StepPlan& plan);
  // Steps from marks holding extra work (an evaluation pass, a checkpoint):
  // by their GPU work, or without any, by the loop's CPU work.
  void MarkExtraWork(StepPlan& plan);
  // The end of an epoch cut off the step where the next epoch's DataLoader
  // workers start (SplitAtEpochStarts, EndEpochsInGroups), from LoopForks' `fork_times`.
  void SplitEpochEnds(StepPlan& plan, const std::vector<uint64_t>& fork_times);
  // The CPU work of each step of `plan` (stretches between backward
  // passes), outside the loop thread's data-loader ranges (a new epoch's
  // iterator forks its workers: data loading, not extra work); empty when
  // the loop's thread has no timeline (never went off the CPU).  `forks` and
  // `evaluation_forks`: LoopForks'.
  std::vector<StepCpuWork> CpuWork(const StepPlan& plan, const std::vector<uint64_t>& forks,
                                   const std::vector<uint64_t>& evaluation_forks) const;
  // The times the loop's thread forked a process that was still alive at
  // the loop's next backward start, sorted: workers that fed the training
  // (a new epoch's, a restarted loader's).  An evaluation's DataLoader
  // forks workers that end with its pass, before the training's next
  // backward pass: its start is extra work, not the iteration's data; those
  // forks go to `ended_before_backward`, sorted, where given.
  std::vector<uint64_t> LoopForks(const StepPlan& plan, std::vector<uint64_t>* ended_before_backward = nullptr) const;
  // Whether a data-loader range began on the loop's thread inside each step.
  std::vector<bool> FetchesInSteps(const StepPlan& plan) const;
  // The loop thread's data-loader ranges, overlapping ones merged, sorted.
  std::vector<Range> DataRanges(const StepPlan& plan) const;
  // [start, end) of each range, as the extra-work rules take them.
  static std::vector<std::pair<uint64_t, uint64_t>> Spans(const std::vector<Range>& ranges);
  // The iterations at the end of the `marked` steps with extra work, cut
  // off and measured (SplitExtraWorkSteps by the GPU work's `tokens`, or
  // without any, SplitExtraCpuWorkSteps by the data ranges and `cpu_work`).
  void SplitOffIterations(StepPlan& plan, const std::vector<SequenceToken>& tokens, const std::vector<size_t>& marked,
                          const std::vector<StepCpuWork>& cpu_work);
  // Where steps begin at backward starts: MoveLoaderRestarts
  // (loader_restart.h) on the `marked` steps, and the note.
  void MoveRestarts(StepPlan& plan, const std::vector<size_t>& marked) const;
  // The loop thread's running time in [from, to) outside the `data` ranges.
  uint64_t RunningOutsideData(const StepPlan& plan, const std::vector<Range>& data, uint64_t from, uint64_t to) const;
  // The backward passes' starts on thread `key` (the Python hook's, the
  // loop's loss.backward() calls, else the uprobe's), sorted.
  std::vector<uint64_t> BackwardStarts(uint64_t key) const;
  // Every backward pass's start in process `pid` (the uprobe's and the
  // Python hook's, on any thread but the autograd engine's), sorted.
  std::vector<uint64_t> BackwardStartsOfProcess(uint32_t pid) const;
  // Whether thread (pid << 32 | tid) is one of PyTorch's autograd engine
  // threads (by its name, thread_roles.h): a backward pass that starts there
  // was called from inside another (reentrant activation checkpointing
  // recomputes and differentiates each segment so), never by the loop.
  bool OnAutogradEngineThread(uint64_t key) const;
  // The data workers of the plan's process.
  void FindWorkers(StepPlan& plan) const;
  // Sources 3 to 8 without annotations; `why` says why sources 1 and 2
  // found nothing.
  void FindUnannotatedSteps(StepPlan& plan, const std::string& why);
  // The launching thread (the most kernel launches, then the most calls,
  // then the earliest first call), or nullptr without CUDA calls.
  const ThreadApi* LaunchingThread(uint64_t& key) const;
  // Source 4a: steps between the shim's live rhythm marks, on the thread
  // with the most; false when there are fewer than two.
  bool LiveRhythmSteps(StepPlan& plan, const std::string& why);
  // Source 6 on `api`; false (with `detail`) when no call is regular.
  bool RhythmSteps(StepPlan& plan, const ThreadApi& api, const std::string& thread, const std::string& why,
                   const std::string& no_period, std::string& detail);
  void FixedWindows(StepPlan& plan, const std::string& why);
  // Source 3 (the Python hook's ranges), or source 5 with from_uprobe
  // (gpuos-trace's uprobes), grouped k at a time when the CPU work between
  // them has a period; false when there are fewer than two.
  bool BackwardSteps(StepPlan& plan, const std::string& why, bool from_uprobe = false);
  // Steps of k backward marks each (`bounds`, sorted, on thread `tid`)
  // when the CPU work between them has a period of k
  // (accumulation_period.h), following the updates: a group with more
  // marks before its update is left out (unless the period's phase
  // changes: then any group is a step).  Returns k and the evidence in
  // `detail`, or 0 and why not.
  uint32_t GroupBackwardSteps(StepPlan& plan, const std::vector<uint64_t>& bounds, uint32_t tid, std::string& detail);
  // Source 4 on process `pid`; false (with `why_not`) when it has no period.
  bool KernelSequenceSteps(StepPlan& plan, uint32_t pid, const std::string& why, std::string& why_not);
  // Source 6; false (with `why_not`) when nothing repeats.
  bool CpuActivitySteps(StepPlan& plan, const std::string& why, std::string& why_not);
  // The GPU work of process `pid` (launches named by their kernels, copies,
  // memsets, synchronizations) in call order; `named`: how many have a GPU
  // record's name; `side_threads`/`side_calls`: the threads left out and
  // their calls.  A thread that makes under kSideThreadShare of the
  // process's calls, where such threads make under kSideThreadsShare of
  // them together, is left out: its calls come at no fixed place in the
  // loop's sequence (a thread that prefetches batches to the GPU, an EMA
  // update beside the loop).
  std::vector<SequenceToken> GpuTokens(uint32_t pid, size_t& named, size_t* side_threads = nullptr,
                                       size_t* side_calls = nullptr) const;
  // Steps from a repeating sequence's iterations, and the note up to the
  // list of steps left out (NoteLeftOut, once the steps are final).
  void PeriodSteps(StepPlan& plan, StepSource source, const PeriodResult& period, const std::string& what,
                   const std::string& why, const std::vector<std::string>& symbol_names);
  // Appends "left out of the summaries: ..." for plan.steps to plan.note.
  static void NoteLeftOut(StepPlan& plan);
  std::string ThreadText(uint32_t tid) const;
  static uint64_t ThreadKey(uint32_t pid, uint32_t tid) { return (static_cast<uint64_t>(pid) << 32) | tid; }

  StepOptions options_;
  StepNameMatcher step_;
  StepNameMatcher worker_;
  StepNameMatcher data_;
  // By (pid << 32 | tid).
  absl::flat_hash_map<uint64_t, std::vector<Range>> step_ranges_;
  absl::flat_hash_map<uint64_t, std::vector<Range>> optimizer_ranges_;
  absl::flat_hash_map<uint64_t, std::vector<Range>> data_ranges_;  // data-loader ranges (fetches, iterators)
  // Thread -> its waits that another process's thread ended, in any order
  // until MoveRestarts sorts a copy.
  absl::flat_hash_map<uint32_t, std::vector<LoopWait>> loop_waits_;
  // The shim's live rhythm marks by thread, and the call they are named after.
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> live_rhythm_marks_;
  std::string live_rhythm_call_;
  absl::flat_hash_map<uint32_t, uint32_t> parent_;  // pid -> ppid
  // When each thread forked a process, and the child's pid, by
  // (pid << 32 | tid) of the parent.
  struct Fork {
    uint64_t ts_ns;
    uint32_t child;
  };
  absl::flat_hash_map<uint64_t, std::vector<Fork>> forks_;
  // Each process's start and exit, where the trace has them.
  absl::flat_hash_map<uint32_t, std::pair<uint64_t, uint64_t>> lifetimes_;
  // tid -> the comm with the latest timestamp.
  absl::flat_hash_map<uint32_t, std::pair<uint64_t, std::string>> comm_;
  absl::flat_hash_set<uint32_t> named_worker_pids_;
  absl::flat_hash_map<uint32_t, uint32_t> named_worker_tids_;  // tid -> pid
  absl::flat_hash_map<uint64_t, ThreadApi> api_;  // by (pid << 32 | tid)
  absl::flat_hash_map<uint64_t, std::vector<Range>> backward_ranges_;
  // The uprobe's marks of backward-pass starts (start == end).
  absl::flat_hash_map<uint64_t, std::vector<Range>> backward_uprobe_starts_;
  // The GPU work's calls (launches, copies, memsets, syncs) for source 4,
  // and the GPU records' names by (pid << 32 | correlation id).
  struct GpuCall {
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t pid;
    uint32_t tid;
    uint32_t correlation_id;
    uint32_t api_symbol;  // the call's own token (API name, or uprobe details)
    bool graph = false;   // a graph launch: its kernels are many
  };
  std::vector<GpuCall> gpu_calls_;
  absl::flat_hash_map<uint64_t, uint32_t> gpu_names_;
  absl::flat_hash_map<std::string, uint32_t> symbol_ids_;
  std::vector<std::string> symbols_;
  uint32_t Symbol(const std::string& name);
  CpuActivityTokens cpu_;
  uint64_t first_event_ns_ = UINT64_MAX;
  uint64_t last_event_ns_ = 0;
  bool attached_ = false;
  uint64_t attach_start_ns_ = 0;
  uint64_t attach_end_ns_ = 0;  // 0: unknown (no trailer)
  uint32_t first_target_ = 0;
  uint32_t root_pid_ = 0;  // the launched command's process
};

}  // namespace gpuos
