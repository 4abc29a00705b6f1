// A sweep over one step's span boundaries; see step_breakdown.h.
#include "analysis/step_breakdown.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "analysis/cuda_api_class.h"
#include "analysis/step_api_calls.h"

namespace gpuos {
namespace {

// What is going on at an instant, as counts of open spans by kind.
enum Counter : uint8_t {
  kApiOther,
  kApiAllocate,
  kApiMemset,
  kApiLaunch,
  kApiCopy,
  kApiPageableCopy,
  kApiSync,
  kInData,
  kInMmap,
  kInMunmap,
  kOffFutex,
  kOffPageFault,
  kOffSyscall,
  kOffUnknown,
  kOffPreempted,
  kOffRunqueue,
  kWaitData,
  kWaitBackward,
  kWaitGpuSync,
  kWaitJobThreads,
  kWaitWorkerProcesses,
  kChainWait,  // a blocked span with a wakeup chain (Edge::chain)
  kDiskRead,   // the thread's own block I/O in flight, reads among it
  kDiskWrite,  // ... other requests
  kGpuKernel,      // a compute kernel: any but a collective's
  kGpuCollective,  // a collective's kernel (NCCL)
  kGpuMemcpy,
  kGpuMemset,
  kAwayFromCuda,   // a stretch of more than kHostWorkGapNs between the thread's CUDA calls
  kCounterCount,
};

struct Edge {
  uint64_t t;
  int8_t delta;
  uint8_t counter;
  uint32_t chain = 0;  // kChainWait: 1 + the chain's index
};

Counter WaitOnCounter(uint8_t wait_on) {
  switch (static_cast<WaitOn>(wait_on)) {
    case WaitOn::kData: return kWaitData;
    case WaitOn::kBackward: return kWaitBackward;
    case WaitOn::kGpuSync: return kWaitGpuSync;
    case WaitOn::kJobThreads: return kWaitJobThreads;
    case WaitOn::kWorkerProcesses: return kWaitWorkerProcesses;
    case WaitOn::kNone: break;
  }
  return kCounterCount;
}

Counter ApiCounter(const TimelineSpan& s) {
  switch (static_cast<CudaApiClass>(s.a)) {
    case CudaApiClass::kSync: return kApiSync;
    case CudaApiClass::kMemcpy: return s.b ? kApiPageableCopy : kApiCopy;
    case CudaApiClass::kLaunch: return kApiLaunch;
    case CudaApiClass::kMemset: return kApiMemset;
    case CudaApiClass::kAllocate: return kApiAllocate;
    default: return kApiOther;
  }
}

Counter BlockedCounter(uint8_t cause) {
  switch (cause) {
    case v1::OFF_CPU_CAUSE_FUTEX: return kOffFutex;
    case v1::OFF_CPU_CAUSE_PAGE_FAULT: return kOffPageFault;
    case v1::OFF_CPU_CAUSE_SYSCALL: return kOffSyscall;
    case v1::OFF_CPU_CAUSE_PREEMPTED: return kOffPreempted;
    default: return kOffUnknown;
  }
}

using Counts = std::array<int32_t, kCounterCount>;

ThreadInstant InstantOf(const Counts& c) {
  ThreadInstant t;
  if (c[kApiSync] > 0) {
    t.api = ThreadApiState::kSync;
  } else if (c[kApiPageableCopy] > 0) {
    t.api = ThreadApiState::kPageableCopy;
  } else if (c[kApiCopy] > 0) {
    t.api = ThreadApiState::kCopy;
  } else if (c[kApiLaunch] > 0) {
    t.api = ThreadApiState::kLaunch;
  } else if (c[kApiMemset] > 0) {
    t.api = ThreadApiState::kMemset;
  } else if (c[kApiAllocate] > 0) {
    t.api = ThreadApiState::kAllocate;
  } else if (c[kApiOther] > 0) {
    t.api = ThreadApiState::kOther;
  }
  t.in_data_range = c[kInData] > 0;
  if (c[kInMunmap] > 0) {
    t.mm = ThreadMmState::kMunmap;
  } else if (c[kInMmap] > 0) {
    t.mm = ThreadMmState::kMmap;
  }
  // A thread is off the CPU for one reason at a time; if records overlap
  // (clock jitter between CPUs), the order below decides.
  if (c[kOffPreempted] > 0) {
    t.off_cpu = ThreadOffCpuState::kPreempted;
  } else if (c[kOffRunqueue] > 0) {
    t.off_cpu = ThreadOffCpuState::kRunqueue;
  } else if (c[kOffPageFault] > 0) {
    t.off_cpu = ThreadOffCpuState::kPageFault;
  } else if (c[kOffFutex] > 0) {
    t.off_cpu = ThreadOffCpuState::kFutex;
  } else if (c[kOffSyscall] > 0) {
    t.off_cpu = ThreadOffCpuState::kSyscall;
  } else if (c[kOffUnknown] > 0) {
    t.off_cpu = ThreadOffCpuState::kUnknown;
  }
  if (c[kWaitData] > 0) {
    t.wait_on = WaitOn::kData;
  } else if (c[kWaitBackward] > 0) {
    t.wait_on = WaitOn::kBackward;
  } else if (c[kWaitGpuSync] > 0) {
    t.wait_on = WaitOn::kGpuSync;
  } else if (c[kWaitJobThreads] > 0) {
    t.wait_on = WaitOn::kJobThreads;
  } else if (c[kWaitWorkerProcesses] > 0) {
    t.wait_on = WaitOn::kWorkerProcesses;
  }
  t.away_from_cuda = c[kAwayFromCuda] > 0;
  if (c[kDiskRead] > 0) {
    t.disk = ThreadDiskState::kRead;
  } else if (c[kDiskWrite] > 0) {
    t.disk = ThreadDiskState::kWrite;
  }
  return t;
}

class Sweep {
 public:
  explicit Sweep(StepRecord& step) : step_(step) {}

  // The chain of the blocked span open now (0: none).
  void SetChain(uint32_t chain) { chain_ = chain; }
  uint32_t chain() const { return chain_; }

  // Charges [at, at + dt), over which the counts `c` hold, to every
  // partition of the step.
  void Account(const Counts& c, uint64_t at, uint64_t dt) {
    const ThreadInstant t = InstantOf(c);
    AccountCpu(t, dt);
    AccountOffCpu(t, dt);
    const bool kernel = c[kGpuKernel] > 0;
    const bool collective = c[kGpuCollective] > 0;
    const bool copy = c[kGpuMemcpy] > 0;
    const bool memset = c[kGpuMemset] > 0;
    AccountGpu(kernel, collective, copy, memset, t.api, dt);
    if (!kernel && !collective && !memset) {
      if (t.api == ThreadApiState::kPageableCopy) step_.exposed_pageable_copy_ns += dt;
      if (t.api == ThreadApiState::kNone && t.mm != ThreadMmState::kNone) step_.exposed_mm_ns += dt;
    }
    Stage stage;
    if (kernel) {
      stage = Stage::kGpuCompute;
    } else if (collective) {
      stage = Stage::kCommunication;
    } else if (memset) {
      stage = Stage::kGpuCompute;
    } else if (copy) {
      stage = Stage::kTransfer;
    } else {
      stage = AccountIdle(t, at, dt);
    }
    step_.stages[static_cast<size_t>(stage)] += dt;
  }

 private:
  void AccountCpu(const ThreadInstant& t, uint64_t dt) {
    CpuParts& cpu = step_.cpu;
    switch (t.api) {
      case ThreadApiState::kSync: cpu.sync_ns += dt; break;
      case ThreadApiState::kPageableCopy:
      case ThreadApiState::kCopy: cpu.copy_api_ns += dt; break;
      case ThreadApiState::kLaunch: cpu.launch_api_ns += dt; break;
      case ThreadApiState::kAllocate: cpu.allocate_api_ns += dt; [[fallthrough]];
      case ThreadApiState::kMemset:
      case ThreadApiState::kOther: cpu.other_cuda_api_ns += dt; break;
      case ThreadApiState::kNone: (t.in_data_range ? cpu.data_wait_ns : cpu.other_ns) += dt; break;
    }
  }

  void AccountOffCpu(const ThreadInstant& t, uint64_t dt) {
    OffCpuParts& off = step_.off_cpu;
    if (t.off_cpu != ThreadOffCpuState::kOnCpu && t.mm != ThreadMmState::kNone) {
      off.mmap_munmap_ns += dt;
      return;
    }
    const bool disk_wait = t.off_cpu == ThreadOffCpuState::kPageFault || t.off_cpu == ThreadOffCpuState::kSyscall ||
                           t.off_cpu == ThreadOffCpuState::kUnknown;
    if (disk_wait && t.disk != ThreadDiskState::kNone) off.disk_ns += dt;
    switch (t.off_cpu) {
      case ThreadOffCpuState::kFutex: off.futex_ns += dt; break;
      case ThreadOffCpuState::kPageFault: off.page_fault_ns += dt; break;
      case ThreadOffCpuState::kSyscall: off.syscall_ns += dt; break;
      case ThreadOffCpuState::kUnknown: off.unknown_ns += dt; break;
      case ThreadOffCpuState::kPreempted: off.preempted_ns += dt; break;
      case ThreadOffCpuState::kRunqueue: off.runqueue_ns += dt; break;
      case ThreadOffCpuState::kOnCpu: break;
    }
  }

  void AccountGpu(bool kernel, bool collective, bool copy, bool memset, ThreadApiState api, uint64_t dt) {
    GpuParts& gpu = step_.gpu;
    if ((kernel || collective) && copy) gpu.copy_overlap_ns += dt;
    if (kernel) {
      gpu.kernel_busy_ns += dt;
    } else if (collective) {
      gpu.comm_only_ns += dt;
    } else if (copy) {
      gpu.copy_only_ns += dt;
    } else if (memset) {
      gpu.memset_only_ns += dt;
    } else {
      gpu.idle_ns += dt;
    }
    const bool idle = !kernel && !collective && !copy && !memset;
    if (idle) {
      if (!in_idle_) {
        ++gpu.idle_stretches;
        idle_run_ = 0;
        after_sync_ = api == ThreadApiState::kSync;
        if (after_sync_) ++gpu.idle_stretches_after_sync;
        after_allocation_ = api == ThreadApiState::kAllocate;
        if (after_allocation_) ++gpu.idle_stretches_after_allocation;
      }
      idle_run_ += dt;
      gpu.longest_idle_ns = std::max(gpu.longest_idle_ns, idle_run_);
      if (after_sync_) gpu.idle_after_sync_ns += dt;
      if (after_allocation_ || api == ThreadApiState::kAllocate) gpu.idle_allocation_ns += dt;
    }
    in_idle_ = idle;
  }

  // GPU idle: the cause, and the chain slice when the cause is a wait on
  // another thread.  Returns the instant's stage.
  Stage AccountIdle(const ThreadInstant& t, uint64_t at, uint64_t dt) {
    const IdleCause cause = AttributeIdleInstant(t);
    step_.gpu_idle[static_cast<size_t>(cause)] += dt;
    if (chain_ != 0 && IsWaitOnThread(cause)) {
      auto& slices = step_.chain_slices;
      if (!slices.empty() && slices.back().chain == chain_ && slices.back().cause == cause &&
          slices.back().to_ns == at) {
        slices.back().to_ns = at + dt;
      } else {
        slices.push_back({chain_, cause, at, at + dt});
      }
    }
    return StageOfIdleCause(cause);
  }

  StepRecord& step_;
  uint32_t chain_ = 0;
  bool in_idle_ = false;
  bool after_sync_ = false;        // the open idle stretch began inside a sync call
  bool after_allocation_ = false;  // ... inside an allocation call
  uint64_t idle_run_ = 0;
};

void AddMemcpy(std::vector<MemcpyPart>& rows, const MemcpyPart& part) {
  for (MemcpyPart& r : rows) {
    if (r.direction == part.direction && r.src_kind == part.src_kind && r.dst_kind == part.dst_kind) {
      r.count += part.count;
      r.bytes += part.bytes;
      r.ns += part.ns;
      return;
    }
  }
  rows.push_back(part);
}

void AddMm(MmTotals& into, const MmTotals& from) {
  into.calls += from.calls;
  into.bytes += from.bytes;
  into.ns += from.ns;
}

void AddBlockIoCounts(BlockIoCounts& into, const BlockIoCounts& from) {
  into.requests += from.requests;
  into.bytes += from.bytes;
  into.ns += from.ns;
}

void AddSwitches(SwitchTotals& into, const SwitchTotals& from) {
  into.voluntary += from.voluntary;
  into.involuntary += from.involuntary;
  into.runqueue_ns += from.runqueue_ns;
}

// Turns the spans that overlap a step into the sweep's edges, clipped to
// the step, and counts on the way what starts in the step.
class EdgeBuilder {
 public:
  EdgeBuilder(StepRecord& step, size_t spans) : step_(step), start_(step.start_ns), end_(step.end_ns) {
    edges_.reserve(spans * 2);
  }

  void Add(const TimelineSpan& s) {
    const uint64_t from = std::max(s.start_ns, start_);
    const uint64_t to = std::min(s.end_ns, end_);
    const bool starts_here = s.start_ns >= start_ && s.start_ns < end_;
    const uint64_t clipped = to > from ? to - from : 0;
    switch (s.kind) {
      case SpanKind::kCudaApi:
        if (starts_here) CountApiCall(s);
        if (clipped) Open(from, to, ApiCounter(s));
        if (to >= from) api_calls_.Add({from, to, s.c, static_cast<CudaApiClass>(s.a), starts_here});
        break;
      case SpanKind::kDataRange:
        if (clipped) Open(from, to, kInData);
        break;
      case SpanKind::kMunmap:
      case SpanKind::kMmap: AddMm(s, starts_here, from, to); break;
      case SpanKind::kOffCpuBlocked:
        if (clipped) AddBlocked(s, from, to);
        break;
      case SpanKind::kOffCpuRunqueue:
        if (clipped) {
          Open(from, to, kOffRunqueue);
          OpenMm(s.b, from, to);
        }
        break;
      case SpanKind::kOffCpuPreempted:
        if (clipped) Open(from, to, kOffPreempted);
        break;
      case SpanKind::kGpuKernel: AddKernel(s, starts_here, from, to); break;
      case SpanKind::kGpuMemcpy: AddMemcpySpan(s, starts_here, from, to); break;
      case SpanKind::kGpuMemset:
        step_.gpu.memset_ns += clipped;
        if (clipped) Open(from, to, kGpuMemset);
        break;
      case SpanKind::kBlockIo:
        if (clipped) Open(from, to, s.a ? kDiskRead : kDiskWrite);
        break;
    }
  }

  // HtoD copy time on streams that also ran kernels: needs every span's
  // stream first.
  void AddHtodOnKernelStreams(const std::vector<const TimelineSpan*>& spans) {
    for (const TimelineSpan* s : spans) {
      if (s->kind != SpanKind::kGpuMemcpy || s->a != v1::MEMCPY_HTOD) continue;
      const uint64_t from = std::max(s->start_ns, start_);
      const uint64_t to = std::min(s->end_ns, end_);
      if (to > from && kernel_streams_.contains(s->id)) step_.gpu.htod_on_kernel_stream_ns += to - from;
    }
  }

  // What the sequence of the thread's calls says (step_api_calls.h).
  void AddCallSequence() {
    for (const auto& [from, to] : api_calls_.AwayFromCuda(start_, end_)) Open(from, to, kAwayFromCuda);
    step_.api.syncs_between_launches = api_calls_.SyncsBetweenLaunches();
    step_.api.allocations = api_calls_.Allocations();
  }

  std::vector<Edge>& edges() { return edges_; }

 private:
  void Open(uint64_t from, uint64_t to, Counter counter) {
    edges_.push_back({from, +1, counter});
    edges_.push_back({to, -1, counter});
  }
  // An off-CPU span inside munmap (1) or mmap (2).
  void OpenMm(uint8_t mm, uint64_t from, uint64_t to) {
    if (mm == 1) Open(from, to, kInMunmap);
    if (mm == 2) Open(from, to, kInMmap);
  }

  void CountApiCall(const TimelineSpan& s) {
    switch (static_cast<CudaApiClass>(s.a)) {
      case CudaApiClass::kLaunch: ++step_.api.launch; break;
      case CudaApiClass::kSync: ++step_.api.sync; break;
      case CudaApiClass::kMemcpy:
        ++step_.api.memcpy;
        if (s.b) ++step_.api.pageable_memcpy;
        break;
      default: break;
    }
  }

  void AddMm(const TimelineSpan& s, bool starts_here, uint64_t from, uint64_t to) {
    const bool munmap = s.kind == SpanKind::kMunmap;
    MmTotals& mm = munmap ? step_.os.munmap : step_.os.mmap;
    if (starts_here) {
      ++mm.calls;
      mm.bytes += s.bytes;
    }
    if (to <= from) return;
    mm.ns += to - from;
    Open(from, to, munmap ? kInMunmap : kInMmap);
  }

  void AddBlocked(const TimelineSpan& s, uint64_t from, uint64_t to) {
    Open(from, to, BlockedCounter(s.a));
    if (WaitOnCounter(s.c) != kCounterCount) Open(from, to, WaitOnCounter(s.c));
    if (s.bytes != 0) {
      edges_.push_back({from, +1, kChainWait, static_cast<uint32_t>(s.bytes)});
      edges_.push_back({to, -1, kChainWait, static_cast<uint32_t>(s.bytes)});
    }
    OpenMm(s.b, from, to);
  }

  void AddKernel(const TimelineSpan& s, bool starts_here, uint64_t from, uint64_t to) {
    const bool collective = s.a != 0;
    GpuParts& gpu = step_.gpu;
    if (starts_here) {
      ++gpu.kernels_started;
      gpu.kernels_started_ns += s.end_ns - s.start_ns;
      if (collective) {
        ++gpu.comm_kernels_started;
        gpu.comm_kernels_started_ns += s.end_ns - s.start_ns;
      }
    }
    if (to <= from) return;
    gpu.kernel_ns += to - from;
    if (collective) gpu.comm_kernel_ns += to - from;
    kernel_streams_.insert(s.id);
    Open(from, to, collective ? kGpuCollective : kGpuKernel);
  }

  void AddMemcpySpan(const TimelineSpan& s, bool starts_here, uint64_t from, uint64_t to) {
    const uint64_t clipped = to > from ? to - from : 0;
    MemcpyPart part;
    part.direction = static_cast<v1::MemcpyDirection>(s.a);
    part.src_kind = static_cast<v1::MemoryKind>(s.b);
    part.dst_kind = static_cast<v1::MemoryKind>(s.c);
    part.count = starts_here ? 1 : 0;
    part.bytes = starts_here ? s.bytes : 0;
    part.ns = clipped;
    if (part.count || part.ns) AddMemcpy(step_.gpu.memcpy, part);
    step_.gpu.memcpy_ns += clipped;
    if (part.direction == v1::MEMCPY_HTOD) step_.gpu.htod_ns += clipped;
    if (clipped) Open(from, to, kGpuMemcpy);
  }

  StepRecord& step_;
  const uint64_t start_;
  const uint64_t end_;
  std::vector<Edge> edges_;
  absl::flat_hash_set<uint32_t> kernel_streams_;
  StepApiCalls api_calls_;
};

bool ByNsThenDirection(const MemcpyPart& x, const MemcpyPart& y) {
  return x.ns != y.ns ? x.ns > y.ns : x.direction < y.direction;
}

// Sweeps the edges in time order over [start_ns, end_ns), charging each
// stretch between edges to the step.
void SweepEdges(std::vector<Edge>& edges, StepRecord& step) {
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.t < y.t; });
  Counts counts{};
  Sweep sweep(step);
  uint64_t cursor = step.start_ns;
  for (size_t i = 0; i < edges.size();) {
    const uint64_t t = edges[i].t;
    if (t > cursor) {
      sweep.Account(counts, cursor, t - cursor);
      cursor = t;
    }
    for (; i < edges.size() && edges[i].t == t; ++i) {
      const Edge& e = edges[i];
      counts[e.counter] += e.delta;
      if (e.counter != kChainWait) continue;
      // Blocked spans of one thread do not overlap; when records from
      // different CPUs touch, the one opening now wins.
      if (e.delta > 0) {
        sweep.SetChain(e.chain);
      } else if (sweep.chain() == e.chain) {
        sweep.SetChain(0);
      }
    }
  }
  if (step.end_ns > cursor) sweep.Account(counts, cursor, step.end_ns - cursor);
}

}  // namespace

StepRecord BreakDownStep(uint64_t start_ns, uint64_t end_ns, const std::vector<const TimelineSpan*>& spans) {
  StepRecord step;
  step.start_ns = start_ns;
  step.end_ns = std::max(start_ns, end_ns);
  EdgeBuilder builder(step, spans.size());
  for (const TimelineSpan* s : spans) builder.Add(*s);
  builder.AddHtodOnKernelStreams(spans);
  builder.AddCallSequence();
  std::sort(step.gpu.memcpy.begin(), step.gpu.memcpy.end(), ByNsThenDirection);
  SweepEdges(builder.edges(), step);
  return step;
}

StageTimes DiskPartOfStages(const StepRecord& step) {
  StageTimes out{};
  out[static_cast<size_t>(Stage::kDataLoading)] += step.gpu_idle[static_cast<size_t>(IdleCause::kDiskRead)];
  out[static_cast<size_t>(StageOfIdleCause(IdleCause::kDiskWrite))] +=
      step.gpu_idle[static_cast<size_t>(IdleCause::kDiskWrite)];
  for (const WaitVia& v : step.via) {
    if (v.last) out[static_cast<size_t>(StageOfIdleCause(v.cause))] += v.states[static_cast<size_t>(HopState::kDisk)];
  }
  return out;
}

void AddStepTotals(StepRecord& total, const StepRecord& s) {
  CpuParts& c = total.cpu;
  c.sync_ns += s.cpu.sync_ns;
  c.copy_api_ns += s.cpu.copy_api_ns;
  c.launch_api_ns += s.cpu.launch_api_ns;
  c.other_cuda_api_ns += s.cpu.other_cuda_api_ns;
  c.data_wait_ns += s.cpu.data_wait_ns;
  c.other_ns += s.cpu.other_ns;
  c.allocate_api_ns += s.cpu.allocate_api_ns;

  OffCpuParts& o = total.off_cpu;
  o.futex_ns += s.off_cpu.futex_ns;
  o.page_fault_ns += s.off_cpu.page_fault_ns;
  o.mmap_munmap_ns += s.off_cpu.mmap_munmap_ns;
  o.syscall_ns += s.off_cpu.syscall_ns;
  o.unknown_ns += s.off_cpu.unknown_ns;
  o.preempted_ns += s.off_cpu.preempted_ns;
  o.runqueue_ns += s.off_cpu.runqueue_ns;
  o.disk_ns += s.off_cpu.disk_ns;

  GpuParts& g = total.gpu;
  g.kernel_busy_ns += s.gpu.kernel_busy_ns;
  g.comm_only_ns += s.gpu.comm_only_ns;
  g.copy_only_ns += s.gpu.copy_only_ns;
  g.memset_only_ns += s.gpu.memset_only_ns;
  g.idle_ns += s.gpu.idle_ns;
  g.kernel_ns += s.gpu.kernel_ns;
  g.comm_kernel_ns += s.gpu.comm_kernel_ns;
  g.memcpy_ns += s.gpu.memcpy_ns;
  g.memset_ns += s.gpu.memset_ns;
  g.copy_overlap_ns += s.gpu.copy_overlap_ns;
  g.htod_ns += s.gpu.htod_ns;
  g.htod_on_kernel_stream_ns += s.gpu.htod_on_kernel_stream_ns;
  g.kernels_started += s.gpu.kernels_started;
  g.kernels_started_ns += s.gpu.kernels_started_ns;
  g.comm_kernels_started += s.gpu.comm_kernels_started;
  g.comm_kernels_started_ns += s.gpu.comm_kernels_started_ns;
  for (const MemcpyPart& m : s.gpu.memcpy) AddMemcpy(g.memcpy, m);
  std::sort(g.memcpy.begin(), g.memcpy.end(), ByNsThenDirection);
  g.idle_stretches += s.gpu.idle_stretches;
  g.longest_idle_ns = std::max(g.longest_idle_ns, s.gpu.longest_idle_ns);
  g.idle_after_sync_ns += s.gpu.idle_after_sync_ns;
  g.idle_stretches_after_sync += s.gpu.idle_stretches_after_sync;
  g.idle_allocation_ns += s.gpu.idle_allocation_ns;
  g.idle_stretches_after_allocation += s.gpu.idle_stretches_after_allocation;

  total.api.launch += s.api.launch;
  total.api.memcpy += s.api.memcpy;
  total.api.pageable_memcpy += s.api.pageable_memcpy;
  total.api.sync += s.api.sync;
  total.api.syncs_between_launches += s.api.syncs_between_launches;
  total.api.allocations += s.api.allocations;

  AddSwitches(total.os.launching, s.os.launching);
  AddSwitches(total.os.workers, s.os.workers);
  AddSwitches(total.os.others, s.os.others);
  total.os.page_faults += s.os.page_faults;
  total.os.major_faults += s.os.major_faults;
  AddMm(total.os.mmap, s.os.mmap);
  AddMm(total.os.munmap, s.os.munmap);
  AddBlockIoCounts(total.os.block_io_launching, s.os.block_io_launching);
  AddBlockIoCounts(total.os.block_io_workers, s.os.block_io_workers);
  AddBlockIoCounts(total.os.block_io_others, s.os.block_io_others);
  total.os.child_starts += s.os.child_starts;
  total.os.child_execs += s.os.child_execs;

  for (size_t i = 0; i < kIdleCauseCount; ++i) total.gpu_idle[i] += s.gpu_idle[i];
  MergeVia(total.via, s.via);
  for (size_t i = 0; i < kStageCount; ++i) total.stages[i] += s.stages[i];
  total.exposed_pageable_copy_ns += s.exposed_pageable_copy_ns;
  total.exposed_mm_ns += s.exposed_mm_ns;
}

}  // namespace gpuos
