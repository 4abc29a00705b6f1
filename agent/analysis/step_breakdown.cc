// A sweep over one step's span boundaries; see step_breakdown.h.
#include "analysis/step_breakdown.h"

#include <algorithm>
#include <array>

#include "absl/container/flat_hash_set.h"
#include "analysis/cuda_api_class.h"

namespace gpuos {
namespace {

// What is going on at an instant, as counts of open spans by kind.
enum Counter : uint8_t {
  kApiOther,
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
  kChainWait,  // a blocked span with a wakeup chain (Edge::chain)
  kGpuKernel,
  kGpuMemcpy,
  kGpuMemset,
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
  }
  return t;
}

class Sweep {
 public:
  explicit Sweep(StepRecord& step) : step_(step) {}

  // The chain of the blocked span open now (0: none).
  void SetChain(uint32_t chain) { chain_ = chain; }
  uint32_t chain() const { return chain_; }

  void Account(const Counts& c, uint64_t at, uint64_t dt) {
    const ThreadInstant t = InstantOf(c);
    CpuParts& cpu = step_.cpu;
    switch (t.api) {
      case ThreadApiState::kSync: cpu.sync_ns += dt; break;
      case ThreadApiState::kPageableCopy:
      case ThreadApiState::kCopy: cpu.copy_api_ns += dt; break;
      case ThreadApiState::kLaunch: cpu.launch_api_ns += dt; break;
      case ThreadApiState::kMemset:
      case ThreadApiState::kOther: cpu.other_cuda_api_ns += dt; break;
      case ThreadApiState::kNone:
        if (t.in_data_range) {
          cpu.data_wait_ns += dt;
        } else {
          cpu.other_ns += dt;
        }
        break;
    }

    OffCpuParts& off = step_.off_cpu;
    if (t.off_cpu != ThreadOffCpuState::kOnCpu && t.mm != ThreadMmState::kNone) {
      off.mmap_munmap_ns += dt;
    } else {
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

    const bool kernel = c[kGpuKernel] > 0;
    const bool copy = c[kGpuMemcpy] > 0;
    const bool memset = c[kGpuMemset] > 0;
    GpuParts& gpu = step_.gpu;
    if (kernel) {
      gpu.kernel_busy_ns += dt;
      if (copy) gpu.copy_overlap_ns += dt;
    } else if (copy) {
      gpu.copy_only_ns += dt;
    } else if (memset) {
      gpu.memset_only_ns += dt;
    } else {
      gpu.idle_ns += dt;
    }
    const bool idle = !kernel && !copy && !memset;
    if (idle) {
      if (!in_idle_) {
        ++gpu.idle_stretches;
        idle_run_ = 0;
      }
      idle_run_ += dt;
      gpu.longest_idle_ns = std::max(gpu.longest_idle_ns, idle_run_);
    }
    in_idle_ = idle;

    if (!kernel && !memset) {
      if (t.api == ThreadApiState::kPageableCopy) step_.exposed_pageable_copy_ns += dt;
      if (t.api == ThreadApiState::kNone && t.mm != ThreadMmState::kNone) step_.exposed_mm_ns += dt;
    }

    Stage stage;
    if (kernel || memset) {
      stage = Stage::kGpuCompute;
    } else if (copy) {
      stage = Stage::kTransfer;
    } else {
      const IdleCause cause = AttributeIdleInstant(t);
      step_.gpu_idle[static_cast<size_t>(cause)] += dt;
      stage = StageOfIdleCause(cause);
      if (chain_ != 0 && IsWaitOnThread(cause)) {
        auto& slices = step_.chain_slices;
        if (!slices.empty() && slices.back().chain == chain_ && slices.back().cause == cause &&
            slices.back().to_ns == at) {
          slices.back().to_ns = at + dt;
        } else {
          slices.push_back({chain_, cause, at, at + dt});
        }
      }
    }
    step_.stages[static_cast<size_t>(stage)] += dt;
  }

 private:
  StepRecord& step_;
  uint32_t chain_ = 0;
  bool in_idle_ = false;
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

void AddSwitches(SwitchTotals& into, const SwitchTotals& from) {
  into.voluntary += from.voluntary;
  into.involuntary += from.involuntary;
  into.runqueue_ns += from.runqueue_ns;
}

}  // namespace

StepRecord BreakDownStep(uint64_t start_ns, uint64_t end_ns, const std::vector<const TimelineSpan*>& spans) {
  StepRecord step;
  step.start_ns = start_ns;
  step.end_ns = std::max(start_ns, end_ns);
  end_ns = step.end_ns;

  std::vector<Edge> edges;
  edges.reserve(spans.size() * 2);
  absl::flat_hash_set<uint32_t> kernel_streams;
  auto add = [&](uint64_t from, uint64_t to, Counter counter) {
    edges.push_back({from, +1, counter});
    edges.push_back({to, -1, counter});
  };
  for (const TimelineSpan* s : spans) {
    const uint64_t from = std::max(s->start_ns, start_ns);
    const uint64_t to = std::min(s->end_ns, end_ns);
    const bool starts_here = s->start_ns >= start_ns && s->start_ns < end_ns;
    const uint64_t clipped = to > from ? to - from : 0;
    switch (s->kind) {
      case SpanKind::kCudaApi:
        if (starts_here) {
          switch (static_cast<CudaApiClass>(s->a)) {
            case CudaApiClass::kLaunch: ++step.api.launch; break;
            case CudaApiClass::kSync: ++step.api.sync; break;
            case CudaApiClass::kMemcpy:
              ++step.api.memcpy;
              if (s->b) ++step.api.pageable_memcpy;
              break;
            default: break;
          }
        }
        if (clipped) add(from, to, ApiCounter(*s));
        break;
      case SpanKind::kDataRange:
        if (clipped) add(from, to, kInData);
        break;
      case SpanKind::kMunmap:
      case SpanKind::kMmap: {
        MmTotals& mm = s->kind == SpanKind::kMunmap ? step.os.munmap : step.os.mmap;
        if (starts_here) {
          ++mm.calls;
          mm.bytes += s->bytes;
        }
        mm.ns += clipped;
        if (clipped) add(from, to, s->kind == SpanKind::kMunmap ? kInMunmap : kInMmap);
        break;
      }
      case SpanKind::kOffCpuBlocked:
        if (clipped) {
          add(from, to, BlockedCounter(s->a));
          if (WaitOnCounter(s->c) != kCounterCount) add(from, to, WaitOnCounter(s->c));
          if (s->bytes != 0) {
            edges.push_back({from, +1, kChainWait, static_cast<uint32_t>(s->bytes)});
            edges.push_back({to, -1, kChainWait, static_cast<uint32_t>(s->bytes)});
          }
          if (s->b == 1) add(from, to, kInMunmap);
          if (s->b == 2) add(from, to, kInMmap);
        }
        break;
      case SpanKind::kOffCpuRunqueue:
        if (clipped) {
          add(from, to, kOffRunqueue);
          if (s->b == 1) add(from, to, kInMunmap);
          if (s->b == 2) add(from, to, kInMmap);
        }
        break;
      case SpanKind::kOffCpuPreempted:
        if (clipped) add(from, to, kOffPreempted);
        break;
      case SpanKind::kGpuKernel:
        if (starts_here) {
          ++step.gpu.kernels_started;
          step.gpu.kernels_started_ns += s->end_ns - s->start_ns;
        }
        step.gpu.kernel_ns += clipped;
        if (clipped) {
          kernel_streams.insert(s->id);
          add(from, to, kGpuKernel);
        }
        break;
      case SpanKind::kGpuMemcpy: {
        MemcpyPart part;
        part.direction = static_cast<v1::MemcpyDirection>(s->a);
        part.src_kind = static_cast<v1::MemoryKind>(s->b);
        part.dst_kind = static_cast<v1::MemoryKind>(s->c);
        part.count = starts_here ? 1 : 0;
        part.bytes = starts_here ? s->bytes : 0;
        part.ns = clipped;
        if (part.count || part.ns) AddMemcpy(step.gpu.memcpy, part);
        step.gpu.memcpy_ns += clipped;
        if (part.direction == v1::MEMCPY_HTOD) step.gpu.htod_ns += clipped;
        if (clipped) add(from, to, kGpuMemcpy);
        break;
      }
      case SpanKind::kGpuMemset:
        step.gpu.memset_ns += clipped;
        if (clipped) add(from, to, kGpuMemset);
        break;
    }
  }
  // Needs every kernel's stream first.
  for (const TimelineSpan* s : spans) {
    if (s->kind != SpanKind::kGpuMemcpy || s->a != v1::MEMCPY_HTOD) continue;
    const uint64_t from = std::max(s->start_ns, start_ns);
    const uint64_t to = std::min(s->end_ns, end_ns);
    if (to > from && kernel_streams.contains(s->id)) step.gpu.htod_on_kernel_stream_ns += to - from;
  }
  std::sort(step.gpu.memcpy.begin(), step.gpu.memcpy.end(), [](const MemcpyPart& x, const MemcpyPart& y) {
    return x.ns != y.ns ? x.ns > y.ns : x.direction < y.direction;
  });

  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.t < y.t; });
  Counts counts{};
  Sweep sweep(step);
  uint64_t cursor = start_ns;
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
  if (end_ns > cursor) sweep.Account(counts, cursor, end_ns - cursor);
  return step;
}

void AddStepTotals(StepRecord& total, const StepRecord& s) {
  CpuParts& c = total.cpu;
  c.sync_ns += s.cpu.sync_ns;
  c.copy_api_ns += s.cpu.copy_api_ns;
  c.launch_api_ns += s.cpu.launch_api_ns;
  c.other_cuda_api_ns += s.cpu.other_cuda_api_ns;
  c.data_wait_ns += s.cpu.data_wait_ns;
  c.other_ns += s.cpu.other_ns;

  OffCpuParts& o = total.off_cpu;
  o.futex_ns += s.off_cpu.futex_ns;
  o.page_fault_ns += s.off_cpu.page_fault_ns;
  o.mmap_munmap_ns += s.off_cpu.mmap_munmap_ns;
  o.syscall_ns += s.off_cpu.syscall_ns;
  o.unknown_ns += s.off_cpu.unknown_ns;
  o.preempted_ns += s.off_cpu.preempted_ns;
  o.runqueue_ns += s.off_cpu.runqueue_ns;

  GpuParts& g = total.gpu;
  g.kernel_busy_ns += s.gpu.kernel_busy_ns;
  g.copy_only_ns += s.gpu.copy_only_ns;
  g.memset_only_ns += s.gpu.memset_only_ns;
  g.idle_ns += s.gpu.idle_ns;
  g.kernel_ns += s.gpu.kernel_ns;
  g.memcpy_ns += s.gpu.memcpy_ns;
  g.memset_ns += s.gpu.memset_ns;
  g.copy_overlap_ns += s.gpu.copy_overlap_ns;
  g.htod_ns += s.gpu.htod_ns;
  g.htod_on_kernel_stream_ns += s.gpu.htod_on_kernel_stream_ns;
  g.kernels_started += s.gpu.kernels_started;
  g.kernels_started_ns += s.gpu.kernels_started_ns;
  for (const MemcpyPart& m : s.gpu.memcpy) AddMemcpy(g.memcpy, m);
  std::sort(g.memcpy.begin(), g.memcpy.end(), [](const MemcpyPart& x, const MemcpyPart& y) {
    return x.ns != y.ns ? x.ns > y.ns : x.direction < y.direction;
  });
  g.idle_stretches += s.gpu.idle_stretches;
  g.longest_idle_ns = std::max(g.longest_idle_ns, s.gpu.longest_idle_ns);

  total.api.launch += s.api.launch;
  total.api.memcpy += s.api.memcpy;
  total.api.pageable_memcpy += s.api.pageable_memcpy;
  total.api.sync += s.api.sync;

  AddSwitches(total.os.launching, s.os.launching);
  AddSwitches(total.os.workers, s.os.workers);
  AddSwitches(total.os.others, s.os.others);
  total.os.page_faults += s.os.page_faults;
  total.os.major_faults += s.os.major_faults;
  AddMm(total.os.mmap, s.os.mmap);
  AddMm(total.os.munmap, s.os.munmap);

  for (size_t i = 0; i < kIdleCauseCount; ++i) total.gpu_idle[i] += s.gpu_idle[i];
  MergeVia(total.via, s.via);
  for (size_t i = 0; i < kStageCount; ++i) total.stages[i] += s.stages[i];
  total.exposed_pageable_copy_ns += s.exposed_pageable_copy_ns;
  total.exposed_mm_ns += s.exposed_mm_ns;
}

}  // namespace gpuos
