// Keeping the launching process's activity within the steps; see
// step_collector.h.
#include "analysis/step_collector.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/ascii.h"

#include "analysis/communication.h"
#include "analysis/cuda_api_class.h"

namespace gpuos {

absl::StatusOr<std::unique_ptr<StepCollector>> StepCollector::Create(const StepPlan& plan,
                                                                     const StepOptions& options,
                                                                     const v1::TraceHeader& header,
                                                                     const ThreadRoles* roles,
                                                                     absl::flat_hash_set<uint32_t> chain_threads) {
  auto data = StepNameMatcher::Create(options.data_range_regex, "--data-range-regex");
  if (!data.ok()) return data.status();
  std::unique_ptr<StepCollector> c(new StepCollector(plan, std::move(*data)));
  c->roles_ = roles;
  c->chain_threads_ = std::move(chain_threads);
  for (const auto& [nr, name] : header.syscall_names()) {
    if (name == "munmap") c->munmap_nr_ = nr;
    if (name == "mmap") c->mmap_nr_ = nr;
    if (name == "mmap2") c->mmap2_nr_ = nr;
  }
  if (!plan.steps.empty()) {
    c->lo_ = UINT64_MAX;
    for (const StepWindow& w : plan.steps) {
      c->lo_ = std::min(c->lo_, w.start_ns);
      c->hi_ = std::max(c->hi_, w.end_ns);
      c->starts_.push_back(w.start_ns);
    }
  }
  c->os_.resize(plan.steps.size());
  return c;
}

int64_t StepCollector::StepAt(uint64_t ts) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), ts);
  if (it == starts_.begin()) return -1;
  const size_t i = static_cast<size_t>(it - starts_.begin()) - 1;
  return ts < plan_.steps[i].end_ns ? static_cast<int64_t>(i) : -1;
}

bool StepCollector::InSpan(uint64_t start, uint64_t duration) const {
  if (start >= hi_) return false;
  return start + duration > lo_ || start >= lo_;
}

uint8_t StepCollector::MmKind(int32_t nr) const {
  if (nr < 0) return 0;
  if (nr == munmap_nr_) return 1;
  if (nr == mmap_nr_ || nr == mmap2_nr_) return 2;
  return 0;
}

namespace {

// A comm without its trailing version ("python3.12" -> "python").
std::string_view ProgramName(std::string_view comm) {
  while (!comm.empty() && (absl::ascii_isdigit(comm.back()) || comm.back() == '.')) comm.remove_suffix(1);
  return comm;
}

}  // namespace

void StepCollector::Add(const v1::Event& e) {
  if (plan_.steps.empty()) return;
  const bool launching = e.pid() == plan_.pid && e.tid() == plan_.tid;
  switch (e.payload_case()) {
    case v1::Event::kGpuKernel:
    case v1::Event::kGpuMemcpy:
    case v1::Event::kGpuMemset:
      if (e.pid() == plan_.pid) AddGpuWork(e);
      break;
    case v1::Event::kCudaApi: {
      const v1::CudaApiCall& a = e.cuda_api();
      if (!launching || !InSpan(e.ts_ns(), a.duration_ns())) break;
      TimelineSpan s;
      s.kind = SpanKind::kCudaApi;
      s.start_ns = e.ts_ns();
      s.end_ns = e.ts_ns() + a.duration_ns();
      s.id = a.correlation_id();
      s.a = static_cast<uint8_t>(ClassifyCudaApi(a.name()));
      // The runtime's copy calls are joined with their GPU record in Finish().
      if (NamesCopyToDevice(a.name())) s.c = kApiCopiesToDevice;
      AddSpan(s);
      break;
    }
    case v1::Event::kNvtxRange: {
      const v1::NvtxRange& r = e.nvtx_range();
      if (!launching || !InSpan(e.ts_ns(), r.duration_ns()) || !data_.Matches(r.name())) break;
      TimelineSpan s;
      s.kind = SpanKind::kDataRange;
      s.start_ns = e.ts_ns();
      s.end_ns = e.ts_ns() + r.duration_ns();
      AddSpan(s);
      break;
    }
    case v1::Event::kMmap:
    case v1::Event::kMunmap:
      if (launching) AddMemoryMap(e);
      break;
    case v1::Event::kPageFaults: {
      if (!launching) break;
      int64_t step = StepAt(e.ts_ns());
      if (step < 0) break;
      os_[step].page_faults += e.page_faults().count();
      os_[step].major_faults += e.page_faults().major();
      break;
    }
    case v1::Event::kOffCpu:
      AddOffCpu(e, launching);
      break;
    case v1::Event::kBlockIo:
      AddBlockIo(e, launching);
      break;
    case v1::Event::kProcessStart:
      // A process found running at the attach was started before it.
      if (e.process_start().ppid() != plan_.pid || e.process_start().preexisting()) break;
      if (int64_t step = StepAt(e.ts_ns()); step >= 0) {
        ++os_[step].child_starts;
        child_starts_[e.pid()] = {step, e.process_start().comm()};
      }
      break;
    case v1::Event::kExec:
      if (auto it = child_starts_.find(e.pid()); it != child_starts_.end()) {
        // Python again (spawn's workers exec the interpreter, named python,
        // python3 or python3.12, whatever the loop's thread is called) or
        // the loop's own program is a worker started afresh; another
        // program (nvidia-smi, git) is not.
        const std::string_view program = ProgramName(e.exec().comm());
        if (program == "python" || program == ProgramName(it->second.second)) {
          ++os_[it->second.first].child_execs;
        } else {
          --os_[it->second.first].child_starts;
        }
        child_starts_.erase(it);  // counted once
      }
      break;
    default:
      break;
  }
}

void StepCollector::AddBlockIo(const v1::Event& e, bool launching) {
  if (e.pid() == 0) return;  // issued for no known thread
  const v1::BlockIo& io = e.block_io();
  const uint64_t ts = e.ts_ns();
  if (int64_t step = StepAt(ts); step >= 0) {
    StepOsCosts& os = os_[step];
    BlockIoCounts& role = launching                          ? os.block_io_launching
                          : plan_.IsWorker(e.pid(), e.tid()) ? os.block_io_workers
                                                             : os.block_io_others;
    ++role.requests;
    role.bytes += io.bytes();
    role.ns += io.duration_ns();
  }
  // Its submitter waits for it from its submission, queued before issue.
  const uint64_t submitted = ts - std::min(ts, io.queued_ns());
  if (!InSpan(submitted, ts + io.duration_ns() - submitted)) return;
  if (roles_ != nullptr && chain_threads_.contains(e.tid())) {
    timelines_.AddBlockIo(e.tid(), submitted, ts + io.duration_ns());
  }
  if (!launching) return;
  TimelineSpan s;
  s.kind = SpanKind::kBlockIo;
  s.start_ns = submitted;
  s.end_ns = ts + io.duration_ns();
  s.bytes = io.bytes();
  s.a = io.rwbs().find('R') != std::string::npos ? 1 : 0;
  AddSpan(s);
}

void StepCollector::AddGpuWork(const v1::Event& e) {
  const uint64_t ts = e.ts_ns();
  TimelineSpan s;
  s.start_ns = ts;
  switch (e.payload_case()) {
    case v1::Event::kGpuKernel:
      if (!InSpan(ts, e.gpu_kernel().duration_ns())) return;
      s.kind = SpanKind::kGpuKernel;
      s.end_ns = ts + e.gpu_kernel().duration_ns();
      s.id = e.gpu_kernel().stream();
      s.a = IsNcclKernel(e.gpu_kernel().name()) ? 1 : 0;
      break;
    case v1::Event::kGpuMemcpy: {
      const v1::GpuMemcpy& m = e.gpu_memcpy();
      const bool pageable = m.src_kind() == v1::MEMORY_PAGEABLE || m.dst_kind() == v1::MEMORY_PAGEABLE;
      const bool to_device = m.direction() == v1::MEMCPY_HTOD;
      if ((pageable || to_device) && m.correlation_id() != 0) {
        copies_[m.correlation_id()] = CopyRecord{pageable, to_device};
      }
      if (!InSpan(ts, m.duration_ns())) return;
      s.kind = SpanKind::kGpuMemcpy;
      s.end_ns = ts + m.duration_ns();
      s.bytes = m.bytes();
      s.id = m.stream();
      s.a = static_cast<uint8_t>(m.direction());
      s.b = static_cast<uint8_t>(m.src_kind());
      s.c = static_cast<uint8_t>(m.dst_kind());
      break;
    }
    case v1::Event::kGpuMemset:
      if (!InSpan(ts, e.gpu_memset().duration_ns())) return;
      s.kind = SpanKind::kGpuMemset;
      s.end_ns = ts + e.gpu_memset().duration_ns();
      s.bytes = e.gpu_memset().bytes();
      s.id = e.gpu_memset().stream();
      break;
    default:
      return;
  }
  AddSpan(s);
}

void StepCollector::AddMemoryMap(const v1::Event& e) {
  const bool munmap = e.payload_case() == v1::Event::kMunmap;
  const uint64_t duration = munmap ? e.munmap().duration_ns() : e.mmap().duration_ns();
  if (!InSpan(e.ts_ns(), duration)) return;
  TimelineSpan s;
  s.kind = munmap ? SpanKind::kMunmap : SpanKind::kMmap;
  s.start_ns = e.ts_ns();
  s.end_ns = e.ts_ns() + duration;
  s.bytes = munmap ? e.munmap().length() : e.mmap().length();
  AddSpan(s);
}

void StepCollector::AddOffCpu(const v1::Event& e, bool launching) {
  const v1::OffCpu& off = e.off_cpu();
  const uint64_t ts = e.ts_ns();
  int64_t step = StepAt(ts);
  if (step >= 0) {
    StepOsCosts& os = os_[step];
    SwitchTotals& role = launching ? os.launching : plan_.IsWorker(e.pid(), e.tid()) ? os.workers : os.others;
    if (off.voluntary()) {
      ++role.voluntary;
    } else {
      ++role.involuntary;
    }
    role.runqueue_ns += off.runqueue_ns();
  }
  if (!InSpan(ts, off.duration_ns())) return;
  const uint64_t end = ts + off.duration_ns();
  if (roles_ != nullptr && chain_threads_.contains(e.tid())) {
    OffCpuInterval iv;
    iv.start_ns = ts;
    iv.end_ns = end;
    iv.wake_ns = off.cause() == v1::OFF_CPU_CAUSE_PREEMPTED ? ts : end - std::min(off.runqueue_ns(), off.duration_ns());
    iv.waker_tid = TrustedWaker(off);
    iv.cause = static_cast<uint8_t>(off.cause());
    iv.mm = MmKind(off.syscall_nr());
    iv.from_interrupt = off.woken_from_interrupt();
    timelines_.Add(e.tid(), iv);
  }
  if (!launching) return;
  if (off.cause() == v1::OFF_CPU_CAUSE_PREEMPTED) {
    TimelineSpan s;
    s.kind = SpanKind::kOffCpuPreempted;
    s.start_ns = ts;
    s.end_ns = end;
    AddSpan(s);
    return;
  }
  const uint64_t runqueue = std::min(off.runqueue_ns(), off.duration_ns());
  const uint8_t mm = MmKind(off.syscall_nr());
  TimelineSpan blocked;
  blocked.kind = SpanKind::kOffCpuBlocked;
  blocked.start_ns = ts;
  blocked.end_ns = end - runqueue;
  blocked.a = static_cast<uint8_t>(off.cause());
  blocked.b = mm;
  blocked.id = static_cast<uint32_t>(off.syscall_nr());
  blocked.bytes = TrustedWaker(off);  // the waker, until FollowWaits()
  if (blocked.end_ns > blocked.start_ns) AddSpan(blocked);
  if (runqueue > 0) {
    TimelineSpan tail;
    tail.kind = SpanKind::kOffCpuRunqueue;
    tail.start_ns = end - runqueue;
    tail.end_ns = end;
    tail.b = mm;
    AddSpan(tail);
  }
}

void StepCollector::FollowWaits() {
  timelines_.Finish();
  for (TimelineSpan& s : spans_) {
    if (s.kind != SpanKind::kOffCpuBlocked) continue;
    const uint32_t waker = static_cast<uint32_t>(s.bytes);
    s.bytes = 0;
    if (roles_ == nullptr || waker == 0) continue;
    WaitChain chain = timelines_.Follow(plan_.tid, s.start_ns, s.end_ns, waker, *roles_);
    if (chain.hops.empty()) continue;
    s.c = static_cast<uint8_t>(chain.on);
    chains_.push_back(std::move(chain));
    s.bytes = chains_.size();
  }
}

void StepCollector::AddVia(StepRecord& step) const {
  std::vector<WaitVia> rows;
  for (const StepRecord::ChainSlice& slice : step.chain_slices) {
    const WaitChain& chain = chains_[slice.chain - 1];
    for (size_t h = 0; h < chain.hops.size(); ++h) {
      WaitVia v;
      v.cause = slice.cause;
      v.hop = static_cast<uint8_t>(h);
      v.last = h + 1 == chain.hops.size();
      v.tid = chain.hops[h];
      v.ns = slice.to_ns - slice.from_ns;
      timelines_.AddStates(v.tid, slice.from_ns, slice.to_ns, v.states);
      rows.push_back(v);
    }
  }
  MergeVia(step.via, rows);
  step.chain_slices.clear();
  step.chain_slices.shrink_to_fit();
}

// Spans sorted by start.  A call's next is the first that starts after it
// ends (a driver call nested in a runtime call is not the runtime call's next).
void StepCollector::MarkCallsBeforeCopiesToDevice() {
  std::vector<TimelineSpan*> calls;
  for (TimelineSpan& s : spans_) {
    if (s.kind == SpanKind::kCudaApi) calls.push_back(&s);
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    size_t j = i + 1;
    while (j < calls.size() && calls[j]->start_ns < calls[i]->end_ns) ++j;
    if (j < calls.size() && (calls[j]->c & kApiCopiesToDevice)) calls[i]->c |= kApiNextCopiesToDevice;
  }
}

std::vector<StepRecord> StepCollector::Finish() {
  FollowWaits();
  std::vector<StepRecord> out;
  out.reserve(plan_.steps.size());
  for (TimelineSpan& s : spans_) {
    if (s.kind != SpanKind::kCudaApi || static_cast<CudaApiClass>(s.a) != CudaApiClass::kMemcpy || s.id == 0) continue;
    const auto copy = copies_.find(s.id);
    if (copy == copies_.end()) continue;
    if (copy->second.pageable) s.b = 1;
    if (copy->second.to_device) s.c |= kApiCopiesToDevice;
  }
  std::sort(spans_.begin(), spans_.end(),
            [](const TimelineSpan& a, const TimelineSpan& b) { return a.start_ns < b.start_ns; });
  MarkCallsBeforeCopiesToDevice();
  // Steps are sorted by start, so a span that ends before one step starts
  // can leave the active set for good.
  std::vector<const TimelineSpan*> active;
  std::vector<const TimelineSpan*> in_step;
  size_t next = 0;
  for (size_t k = 0; k < plan_.steps.size(); ++k) {
    const StepWindow& w = plan_.steps[k];
    while (next < spans_.size() && spans_[next].start_ns < w.end_ns) active.push_back(&spans_[next++]);
    auto gone = [&](const TimelineSpan* s) { return s->end_ns <= w.start_ns && s->start_ns < w.start_ns; };
    active.erase(std::remove_if(active.begin(), active.end(), gone), active.end());
    in_step.clear();
    for (const TimelineSpan* s : active) {
      if (s->start_ns < w.end_ns) in_step.push_back(s);
    }
    StepRecord r = BreakDownStep(w.start_ns, w.end_ns, in_step);
    r.index = w.index;
    r.warmup = w.warmup;
    r.left_out = w.left_out;
    r.os.launching = os_[k].launching;
    r.os.workers = os_[k].workers;
    r.os.others = os_[k].others;
    r.os.page_faults = os_[k].page_faults;
    r.os.major_faults = os_[k].major_faults;
    r.os.block_io_launching = os_[k].block_io_launching;
    r.os.block_io_workers = os_[k].block_io_workers;
    r.os.block_io_others = os_[k].block_io_others;
    r.os.child_starts = os_[k].child_starts;
    r.os.child_execs = os_[k].child_execs;
    AddVia(r);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gpuos
