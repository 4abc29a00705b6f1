// Finding the launching thread, its steps and the data workers; see
// step_finder.h.
#include "analysis/step_finder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/ms_text.h"
#include "analysis/cuda_api_class.h"
#include "analysis/thread_activity.h"
#include "cupti_shim/optimizer_step_cycle.h"
#include "stream/event_comm.h"

namespace gpuos {
namespace {

// Fixed windows beyond this many are widened: a tiny --window over an hour
// would otherwise make billions of steps, and a report of 100,000 took the
// fuzzer's 10 s under ASan (a fuzzed timestamp far from the others).
constexpr uint64_t kMaxFixedWindows = 10000;

// "HTOD" for MEMCPY_HTOD; a value this build does not know (a newer
// writer's, or a damaged file's) by its number.
std::string DirectionToken(int direction) {
  const std::string& name = v1::MemcpyDirection_Name(static_cast<v1::MemcpyDirection>(direction));
  constexpr std::string_view kPrefix = "MEMCPY_";
  if (name.size() > kPrefix.size() && name.compare(0, kPrefix.size(), kPrefix) == 0) return name.substr(kPrefix.size());
  return absl::StrCat("direction ", direction);
}

}  // namespace

const char* StepSourceName(StepSource source) {
  switch (source) {
    case StepSource::kNvtxRanges: return "nvtx_step_ranges";
    case StepSource::kOptimizerSteps: return "optimizer_step_ranges";
    case StepSource::kApiRhythm: return "cuda_api_rhythm";
    case StepSource::kFixedWindows: return "fixed_windows";
    case StepSource::kBackwardRanges: return "backward_ranges";
    case StepSource::kRepeatingKernelSequence: return "repeating_kernel_sequence";
    case StepSource::kRepeatingCpuActivity: return "repeating_cpu_activity";
    case StepSource::kBackwardUprobe: return "backward_uprobe";
    case StepSource::kBackwardGroups: return "backward_groups";
    case StepSource::kNone: break;
  }
  return "none";
}

const char* StepSourceText(StepSource source) {
  switch (source) {
    case StepSource::kNvtxRanges: return "NVTX step ranges";
    case StepSource::kOptimizerSteps: return "optimizer.step ranges";
    case StepSource::kApiRhythm: return "the rhythm of CUDA API calls";
    case StepSource::kFixedWindows: return "fixed time windows";
    case StepSource::kBackwardRanges: return "autograd.backward ranges";
    case StepSource::kRepeatingKernelSequence: return "the repeating sequence of GPU work";
    case StepSource::kRepeatingCpuActivity: return "the repeating pattern of CPU activity";
    case StepSource::kBackwardUprobe: return "backward passes (uprobes on the autograd engine)";
    case StepSource::kBackwardGroups: return "groups of backward passes (gradient accumulation)";
    case StepSource::kNone: break;
  }
  return "nothing";
}

bool StepSourceIsInferred(StepSource source) {
  return source == StepSource::kApiRhythm || source == StepSource::kFixedWindows ||
         source == StepSource::kBackwardRanges || source == StepSource::kRepeatingKernelSequence ||
         source == StepSource::kRepeatingCpuActivity || source == StepSource::kBackwardUprobe ||
         source == StepSource::kBackwardGroups;
}

uint32_t StepLocator::Symbol(const std::string& name) {
  auto [it, inserted] = symbol_ids_.try_emplace(name, static_cast<uint32_t>(symbols_.size()));
  if (inserted) symbols_.push_back(name);
  return it->second;
}

void StepLocator::SetHeader(const v1::TraceHeader& header) {
  root_pid_ = header.root_pid();
  attached_ = header.has_attach();
  if (!attached_) return;
  attach_start_ns_ = header.attach().start_ns();
  if (header.attach().target_pids_size() > 0) first_target_ = header.attach().target_pids(0);
}

void StepLocator::SetTrailer(const v1::TraceTrailer& trailer) { attach_end_ns_ = trailer.attach_end_ns(); }

absl::StatusOr<std::unique_ptr<StepLocator>> StepLocator::Create(const StepOptions& options) {
  auto step = StepNameMatcher::Create(options.step_regex, "--step-regex");
  if (!step.ok()) return step.status();
  auto worker = StepNameMatcher::Create(options.worker_comm_regex, "worker comm regex");
  if (!worker.ok()) return worker.status();
  auto data = StepNameMatcher::Create(options.data_range_regex, "--data-range-regex");
  if (!data.ok()) return data.status();
  return std::unique_ptr<StepLocator>(
      new StepLocator(options, std::move(*step), std::move(*worker), std::move(*data)));
}

void StepLocator::SeeComm(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  auto [it, inserted] = comm_.try_emplace(tid, ts, comm);
  if (!inserted && ts >= it->second.first) it->second = {ts, comm};
  if (worker_.Matches(comm)) {
    named_worker_tids_[tid] = pid;
    if (tid == pid) named_worker_pids_.insert(pid);
  }
}

void StepLocator::Add(const v1::Event& e) {
  first_event_ns_ = std::min(first_event_ns_, e.ts_ns());
  last_event_ns_ = std::max(last_event_ns_, e.ts_ns());
  switch (e.payload_case()) {
    case v1::Event::kCudaApi: {
      const v1::CudaApiCall& call = e.cuda_api();
      ThreadApi& t = api_.try_emplace(ThreadKey(e.pid(), e.tid()), options_).first->second;
      const CudaApiClass api_class = ClassifyCudaApi(call.name());
      if (api_class == CudaApiClass::kLaunch) ++t.launches;
      t.first_ns = std::min(t.first_ns, e.ts_ns());
      t.rhythm.Add(call.name(), e.ts_ns() + call.duration_ns());
      // Allocations come and go with the caching allocator's state, not
      // the step's work: no token, as for the other calls.
      if (api_class == CudaApiClass::kOther || api_class == CudaApiClass::kAllocate) break;
      const std::string_view api = StripCudaApiSuffixes(call.name());
      std::string token(api);
      if (call.from_uprobe()) {
        // No GPU record will name it: the call's own arguments do.
        if (call.grid_x() || call.block_x()) {
          absl::StrAppendFormat(&token, " grid %dx%dx%d block %dx%dx%d", call.grid_x(), call.grid_y(),
                                call.grid_z(), call.block_x(), call.block_y(), call.block_z());
        }
        if (call.bytes()) absl::StrAppend(&token, " ", call.bytes(), " B");
      }
      gpu_calls_.push_back(GpuCall{e.ts_ns(), e.ts_ns() + call.duration_ns(), e.pid(), e.tid(), call.correlation_id(),
                                   Symbol(token), api.find("Graph") != std::string_view::npos});
      break;
    }
    case v1::Event::kGpuKernel:
    case v1::Event::kGpuMemcpy:
    case v1::Event::kGpuMemset:
      SeeGpuRecord(e);
      break;
    case v1::Event::kOffCpu:
      SeeLoopWait(e);
      [[fallthrough]];
    case v1::Event::kPageFaults:
    case v1::Event::kMmap:
    case v1::Event::kMunmap:
      cpu_.Add(e);
      break;
    case v1::Event::kNvtxMark:
      // gpuos-trace's own mark of a backward pass's start (the autograd engine's uprobe), never a user's.
      if (e.nvtx_mark().domain() == kBackwardUprobeDomain && e.nvtx_mark().name() == kDefaultBackwardRangeName) {
        backward_uprobe_starts_[ThreadKey(e.pid(), e.tid())].push_back(Range{e.ts_ns(), e.ts_ns(), -1});
      } else if (e.nvtx_mark().domain() == kLiveRhythmDomain) {
        live_rhythm_marks_[ThreadKey(e.pid(), e.tid())].push_back(e.ts_ns());
        live_rhythm_call_ = e.nvtx_mark().name();
      }
      break;
    case v1::Event::kNvtxRange: {
      const v1::NvtxRange& r = e.nvtx_range();
      if (r.duration_ns() == 0) break;  // never ended, or a zero-length marker
      Range range{e.ts_ns(), e.ts_ns() + r.duration_ns(), -1};
      if (step_.Matches(r.name())) {
        range.number = TrailingNumber(r.name());
        step_ranges_[ThreadKey(e.pid(), e.tid())].push_back(range);
      } else if (const uint32_t optimizer = gpuos_capture::OptimizerNumber(r.name(), options_.optimizer_range_name)) {
        range.number = optimizer;
        optimizer_ranges_[ThreadKey(e.pid(), e.tid())].push_back(range);
      } else if (r.name() == options_.backward_range_name) {
        backward_ranges_[ThreadKey(e.pid(), e.tid())].push_back(range);
      } else if (data_.Matches(r.name())) {
        data_ranges_[ThreadKey(e.pid(), e.tid())].push_back(range);
      }
      break;
    }
    default:
      break;
  }
  SeeProcessLife(e);
  if (const std::string* comm = StatedComm(e)) SeeComm(e.ts_ns(), e.pid(), e.tid(), *comm);
}

void StepLocator::SeeGpuRecord(const v1::Event& e) {
  if (e.has_gpu_kernel()) {
    gpu_names_.try_emplace(ThreadKey(e.pid(), e.gpu_kernel().correlation_id()), Symbol(e.gpu_kernel().name()));
  } else if (e.has_gpu_memcpy()) {
    const v1::GpuMemcpy& m = e.gpu_memcpy();
    gpu_names_.try_emplace(ThreadKey(e.pid(), m.correlation_id()),
                           Symbol(absl::StrCat("memcpy ", DirectionToken(m.direction()), " ", m.bytes(), " B")));
  } else if (e.has_gpu_memset()) {
    gpu_names_.try_emplace(ThreadKey(e.pid(), e.gpu_memset().correlation_id()),
                           Symbol(absl::StrCat("memset ", e.gpu_memset().bytes(), " B")));
  }
}

void StepLocator::SeeLoopWait(const v1::Event& e) {
  const v1::OffCpu& off = e.off_cpu();
  if (TrustedWaker(off) == 0 || off.waker_pid() == 0 || off.waker_pid() == e.pid()) return;
  loop_waits_[e.tid()].push_back(LoopWait{e.ts_ns(), e.ts_ns() + off.duration_ns(), off.waker_pid()});
}

void StepLocator::SeeProcessLife(const v1::Event& e) {
  if (e.payload_case() == v1::Event::kProcessExit) {
    lifetimes_.try_emplace(e.pid(), 0, 0).first->second.second = e.ts_ns();
    return;
  }
  if (e.payload_case() != v1::Event::kProcessStart) return;
  parent_[e.pid()] = e.process_start().ppid();
  lifetimes_[e.pid()] = {e.ts_ns(), UINT64_MAX};
  // A process found running at the attach was not forked then.
  if (!e.process_start().preexisting()) {
    forks_[ThreadKey(e.process_start().ppid(), e.process_start().parent_tid())].push_back({e.ts_ns(), e.pid()});
  }
}

std::pair<uint64_t, std::vector<StepLocator::Range>*> StepLocator::MostRanges(RangesByThread& by_thread) {
  std::pair<uint64_t, std::vector<Range>*> best{0, nullptr};
  uint64_t best_first = 0;
  for (auto& [key, ranges] : by_thread) {
    uint64_t first = UINT64_MAX;
    for (const Range& r : ranges) first = std::min(first, r.start_ns);
    if (best.second == nullptr || ranges.size() > best.second->size() ||
        (ranges.size() == best.second->size() && (first < best_first || (first == best_first && key < best.first)))) {
      best = {key, &ranges};
      best_first = first;
    }
  }
  return best;
}

StepPlan StepLocator::Finish() {
  StepPlan plan;
  plan.data_fetch_ranges = !data_ranges_.empty();
  plan.python_hook_marks = !optimizer_ranges_.empty() || !backward_ranges_.empty();
  if (attached_) {
    plan.attach_start_ns = attach_start_ns_;
    plan.attach_end_ns = attach_end_ns_ ? attach_end_ns_ : last_event_ns_;
  }
  if (!step_ranges_.empty()) {
    NvtxRangeSteps(plan);
  } else if (!optimizer_ranges_.empty()) {
    OptimizerSteps(plan);
  } else {
    plan.note = absl::StrCat("no NVTX range is named like a training step (--step-regex \"", options_.step_regex,
                             "\") and there are no \"", options_.optimizer_range_name,
                             "\" ranges: annotate each step with an NVTX range, e.g. "
                             "nvtx.annotate(f\"step {i}\") around the loop body");
    const std::string why = absl::StrCat("no NVTX step ranges (--step-regex) and no \"",
                                         options_.optimizer_range_name, "\" ranges");
    if (!BackwardSteps(plan, why)) FindUnannotatedSteps(plan, why);
  }
  if (attached_ && !plan.steps.empty()) ClipToAttachWindow(plan);
  for (size_t i = 0; i < plan.steps.size() && i < options_.warmup_steps; ++i) plan.steps[i].warmup = true;
  if (plan.source == StepSource::kNone) return plan;
  // The extra-work rules tell the loop's workers' waits by them.
  FindWorkers(plan);
  if (plan.source == StepSource::kOptimizerSteps || plan.source == StepSource::kBackwardRanges ||
      plan.source == StepSource::kBackwardUprobe || plan.source == StepSource::kBackwardGroups) {
    MarkExtraWork(plan);
  }
  auto comm = comm_.find(plan.tid);
  if (comm != comm_.end()) plan.thread_comm = comm->second.second;
  return plan;
}

void StepLocator::NvtxRangeSteps(StepPlan& plan) {
  auto [key, ranges] = MostRanges(step_ranges_);
  plan.source = StepSource::kNvtxRanges;
  plan.pid = static_cast<uint32_t>(key >> 32);
  plan.tid = static_cast<uint32_t>(key);
  plan.other_threads_with_steps = static_cast<uint32_t>(step_ranges_.size() - 1);
  std::sort(ranges->begin(), ranges->end(), [](const Range& a, const Range& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  // A step range inside another (a user's "step 3" inside the profiler's
  // "ProfilerStep#3") would count the same time twice: keep the outer one.
  uint64_t outer_end = 0;
  for (const Range& r : *ranges) {
    if (!plan.steps.empty() && r.end_ns <= outer_end) continue;
    StepWindow w;
    w.start_ns = r.start_ns;
    w.end_ns = r.end_ns;
    w.index = r.number >= 0 ? static_cast<uint64_t>(r.number) : plan.steps.size();
    plan.steps.push_back(w);
    outer_end = r.end_ns;
  }
}

void StepLocator::OptimizerSteps(StepPlan& plan) {
  auto [key, ranges] = MostRanges(optimizer_ranges_);
  plan.source = StepSource::kOptimizerSteps;
  plan.pid = static_cast<uint32_t>(key >> 32);
  plan.tid = static_cast<uint32_t>(key);
  std::sort(ranges->begin(), ranges->end(), [](const Range& a, const Range& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  // One optimizer's step inside another's (a wrapper's, in traces from
  // before the hook marked only the outer one) is part of it.
  std::vector<Range> outer;
  for (const Range& r : *ranges) {
    if (!outer.empty() && r.end_ns <= outer.back().end_ns) continue;
    outer.push_back(r);
  }
  // Which returns end a step where several optimizers step (a GAN's two):
  // the shim's rule, so that capture windows and the report agree.
  gpuos_capture::OptimizerStepCycle cycle;
  std::vector<size_t> boundaries;
  for (size_t i = 0; i < outer.size(); ++i) {
    const gpuos_capture::OptimizerStepCycle::Outcome o = cycle.Add(static_cast<uint32_t>(outer[i].number));
    if (o.began_at >= 0) boundaries.assign(1, static_cast<size_t>(o.began_at));
    // The new boundary's returns since the old one's last.
    const size_t first_new = boundaries.size();
    const size_t after_last = boundaries.empty() ? 0 : boundaries.back() + 1;
    for (size_t j = i; j-- > after_last && boundaries.size() - first_new < o.earlier_boundaries;) {
      if (outer[j].number == outer[i].number) boundaries.push_back(j);
    }
    std::reverse(boundaries.begin() + static_cast<std::ptrdiff_t>(first_new), boundaries.end());
    if (o.ends_step) boundaries.push_back(i);
  }
  // Step i runs from the end of the (i-1)th boundary optimizer step to
  // the end of the i-th: fetch, forward, backward and update of one batch.
  for (size_t i = 1; i < boundaries.size(); ++i) {
    StepWindow w;
    w.start_ns = outer[boundaries[i - 1]].end_ns;
    w.end_ns = outer[boundaries[i]].end_ns;
    if (w.end_ns <= w.start_ns) continue;
    w.index = i;
    plan.steps.push_back(w);
  }
  // Returns after the first boundary that end no step: other optimizers'
  // updates inside the steps (none where each optimizer replaced the last).
  const size_t inside = boundaries.empty() ? 0 : outer.size() - boundaries.front() - boundaries.size();
  if (cycle.optimizers_seen() > 1 && !plan.steps.empty() && inside == 0) {
    plan.note = absl::StrFormat(
        "%d optimizers stepped on this thread one after another (each took over from the one before: a new "
        "cross-validation fold, trial or training phase): every return of \"%s\" (any number) ends a step",
        cycle.optimizers_seen(), options_.optimizer_range_name);
  } else if (cycle.optimizers_seen() > 1 && !plan.steps.empty()) {
    const std::string boundary =
        cycle.boundary() == 1 ? options_.optimizer_range_name
                              : absl::StrCat(options_.optimizer_range_name, "#", cycle.boundary());
    plan.note = absl::StrFormat(
        "%d optimizers step on this thread (the Python hook numbers them \"%s\", \"%s#2\", ...): steps run "
        "between consecutive returns of \"%s\", and the other optimizers' updates fall inside them",
        cycle.optimizers_seen(), options_.optimizer_range_name, options_.optimizer_range_name, boundary);
  }
  if (!plan.steps.empty()) return;
  plan.source = StepSource::kNone;
  plan.note = absl::StrCat("only one \"", options_.optimizer_range_name,
                           "\" range: steps are the intervals between two of them");
  FindUnannotatedSteps(plan, absl::StrCat("only one \"", options_.optimizer_range_name, "\" range"));
}

void StepLocator::ClipToAttachWindow(StepPlan& plan) {
  // Nothing before the attach is in the trace, nothing after its end
  // was recorded whole: a step reaching out of the window is cut to it.
  const uint64_t lo = attach_start_ns_;
  const uint64_t hi = attach_end_ns_ ? attach_end_ns_ : UINT64_MAX;
  std::vector<StepWindow> kept;
  for (StepWindow w : plan.steps) {
    w.start_ns = std::max(w.start_ns, lo);
    w.end_ns = std::min(w.end_ns, hi);
    if (w.end_ns > w.start_ns) kept.push_back(w);
  }
  if (kept.empty()) {
    plan.note = absl::StrCat("every step (from ", StepSourceText(plan.source), ") lies outside the attach window");
    plan.source = StepSource::kNone;
  }
  plan.steps = std::move(kept);
}

void StepLocator::FindWorkers(StepPlan& plan) const {
  // Descendants of the launching process: DataLoader workers are its children.
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> children;
  for (const auto& [pid, ppid] : parent_) {
    if (pid != ppid) children[ppid].push_back(pid);
  }
  std::vector<uint32_t> todo = {plan.pid};
  absl::flat_hash_set<uint32_t> seen = {plan.pid};
  while (!todo.empty()) {
    uint32_t pid = todo.back();
    todo.pop_back();
    auto it = children.find(pid);
    if (it == children.end()) continue;
    for (uint32_t child : it->second) {
      if (!seen.insert(child).second) continue;
      plan.worker_pids.insert(child);
      todo.push_back(child);
    }
  }
  for (uint32_t pid : named_worker_pids_) {
    if (pid != plan.pid) plan.worker_pids.insert(pid);
  }
  absl::flat_hash_set<uint32_t> worker_processes(plan.worker_pids.begin(), plan.worker_pids.end());
  for (const auto& [tid, pid] : named_worker_tids_) {
    if (tid == plan.tid) continue;
    plan.worker_tids.insert(tid);
    if (pid != plan.pid) worker_processes.insert(pid);
  }
  plan.worker_processes_started = static_cast<uint32_t>(worker_processes.size());
  plan.worker_processes = PeakAlive(worker_processes);
}

uint32_t StepLocator::PeakAlive(const absl::flat_hash_set<uint32_t>& pids) const {
  std::vector<std::pair<uint64_t, int>> changes;  // (time, +1 start / -1 exit); exits first at a tie
  for (uint32_t pid : pids) {
    auto it = lifetimes_.find(pid);
    const auto [start, end] = it != lifetimes_.end() ? it->second : std::pair<uint64_t, uint64_t>{0, UINT64_MAX};
    changes.emplace_back(start, 1);
    changes.emplace_back(end, -1);
  }
  std::sort(changes.begin(), changes.end());
  int alive = 0, peak = 0;
  for (const auto& [t, d] : changes) peak = std::max(peak, alive += d);
  return static_cast<uint32_t>(peak);
}

std::string StepLocator::ThreadText(uint32_t tid) const {
  auto comm = comm_.find(tid);
  if (comm == comm_.end()) return absl::StrCat(tid);
  return absl::StrCat(tid, " \"", comm->second.second, "\"");
}

const StepLocator::ThreadApi* StepLocator::LaunchingThread(uint64_t& best_key) const {
  const ThreadApi* best = nullptr;
  for (const auto& [key, t] : api_) {
    bool better = best == nullptr;
    if (!better && t.launches != best->launches) {
      better = t.launches > best->launches;
    } else if (!better && t.rhythm.calls() != best->rhythm.calls()) {
      better = t.rhythm.calls() > best->rhythm.calls();
    } else if (!better) {
      better = t.first_ns < best->first_ns || (t.first_ns == best->first_ns && key < best_key);
    }
    if (better) {
      best = &t;
      best_key = key;
    }
  }
  return best;
}

void StepLocator::FindUnannotatedSteps(StepPlan& plan, const std::string& why) {
  if (LiveRhythmSteps(plan, why)) return;
  uint64_t best_key = 0;
  const ThreadApi* best = LaunchingThread(best_key);
  std::string detail;
  if (best != nullptr) {
    plan.pid = static_cast<uint32_t>(best_key >> 32);
    plan.tid = static_cast<uint32_t>(best_key);
    const std::string thread =
        absl::StrCat("thread ", ThreadText(plan.tid), best->launches ? ", the launching thread (the most kernel launches)"
                                                                     : ", the thread with the most CUDA API calls");
    std::string no_period;
    // The GPU work's period first: it spans a whole optimizer step (with
    // gradient accumulation, its k backward passes and the update), where
    // the backward passes alone cannot tell micro-batches from steps.
    // Backward passes come next: counted exactly, one per call, where the
    // rhythm of API calls is a guess from their timing.
    if (KernelSequenceSteps(plan, plan.pid, why, no_period)) return;
    if (BackwardSteps(plan, absl::StrCat(why, "; ", no_period), /*from_uprobe=*/true)) return;
    if (RhythmSteps(plan, *best, thread, why, no_period, detail)) return;
  } else {
    // Backward passes before the CPU activity's period: they are the job's
    // own calls, where blocking points are a guess (a CPU loop's intra-op
    // pools do its waiting, not once per iteration).
    if (BackwardSteps(plan, why, /*from_uprobe=*/true)) return;
    std::string no_period;
    if (CpuActivitySteps(plan, why, no_period)) return;
    if (!attached_ || first_target_ == 0) {
      // A launched trace without CUDA and without a period: nothing to go by.
      plan.note = absl::StrCat(plan.note, "; no CUDA API calls, and ", no_period);
      return;
    }
    plan.pid = first_target_;
    plan.tid = first_target_;
    detail = absl::StrCat("no CUDA API calls; the windows are on pid ", first_target_, "'s main thread ",
                          ThreadText(first_target_), " (", no_period, ")");
  }
  FixedWindows(plan, absl::StrCat(why, "; ", detail));
}

bool StepLocator::RhythmSteps(StepPlan& plan, const ThreadApi& api, const std::string& thread,
                              const std::string& why, const std::string& no_period, std::string& detail) {
  RhythmChoice choice = api.rhythm.Choose();
  if (choice.found()) {
    const RhythmCandidate& a = choice.anchor();
    std::vector<StepWindow> steps;
    for (size_t i = 1; i < a.times.size(); ++i) {
      if (a.times[i] <= a.times[i - 1]) continue;
      StepWindow w;
      w.start_ns = a.times[i - 1];
      w.end_ns = a.times[i];
      w.index = i - 1;
      steps.push_back(w);
    }
    if (!steps.empty()) {
      plan.source = StepSource::kApiRhythm;
      plan.anchor_name = a.name;
      plan.steps = std::move(steps);
      plan.note = absl::StrFormat(
          "%s; %s; steps run from the end of one %s call to the next on %s: %d calls, one every %s on average, "
          "CV of the intervals %.3f%s; %s is the most frequent CUDA API call of that thread that recurs at "
          "near-constant intervals (>= %d calls, mean interval >= %s, CV <= %.2f, the longest %.0f%% of "
          "intervals set aside as pauses)",
          why, no_period, a.name, thread, a.calls, MsText(a.mean_interval_ns), a.cv,
          a.excused ? absl::StrFormat(" (the %d longest of %d intervals set aside as pauses)", a.excused, a.intervals)
                    : std::string(),
          a.name, options_.rhythm_min_calls, MsText(static_cast<double>(options_.rhythm_min_interval_ns)),
          options_.rhythm_max_cv, 100 * options_.rhythm_excused_fraction);
      return true;
    }
  }
  const RhythmCandidate* closest = choice.closest_irregular();
  detail = absl::StrCat(no_period, "; no CUDA API call of ", thread, " recurs regularly enough to mark steps");
  if (closest != nullptr) {
    absl::StrAppendFormat(&detail, " (the closest: %s, %d calls, %s)", closest->name, closest->calls,
                          closest->why_not);
  }
  return false;
}

void StepLocator::FixedWindows(StepPlan& plan, const std::string& why) {
  const bool window = attached_;
  const uint64_t lo = window ? attach_start_ns_ : first_event_ns_;
  const uint64_t hi = window && attach_end_ns_ ? attach_end_ns_ : last_event_ns_;
  const char* over = window ? "the attach window" : "the trace";
  if (options_.fixed_window_ns == 0 || lo == UINT64_MAX || hi <= lo) {
    plan.note = absl::StrCat(why, "; and ", over, " is empty or windows are off: no steps");
    return;
  }
  const uint64_t span = hi - lo;
  uint64_t width = options_.fixed_window_ns;
  std::string widened;
  if (span / width > kMaxFixedWindows) {
    width = (span + kMaxFixedWindows - 1) / kMaxFixedWindows;
    widened = absl::StrCat(", widened from ", MsText(static_cast<double>(options_.fixed_window_ns)), " to keep ",
                           kMaxFixedWindows, " windows at most");
  }
  uint64_t n = span / width;
  std::string rest;
  if (n == 0) {
    // Shorter than one window: the whole span is the one window.
    n = 1;
    width = span;
  } else if (span % width != 0) {
    rest = absl::StrCat("; the last ", MsText(static_cast<double>(span % width)), ", shorter than a window, left out");
  }
  plan.steps.clear();
  for (uint64_t i = 0; i < n; ++i) {
    StepWindow w;
    w.index = i;
    w.start_ns = lo + i * width;
    w.end_ns = w.start_ns + width;
    plan.steps.push_back(w);
  }
  plan.source = StepSource::kFixedWindows;
  plan.note = absl::StrFormat(
      "%s; so steps are fixed windows of %s%s over %s on thread %s (%d windows%s): each is a slice of time, "
      "not a training step",
      why, MsText(static_cast<double>(width)), widened, over, ThreadText(plan.tid), n, rest);
}

}  // namespace gpuos
