// The OS kinds: see timeline/kinds/os_kinds.h.
#include "export/timeline/kinds/os_kinds.h"

#include <algorithm>

namespace gpuos {
namespace {

const char* OffCpuCauseName(uint32_t cause) {
  static constexpr const char* kCauses[] = {"unknown", "preempted", "futex", "syscall", "page fault"};
  static_assert(std::size(kCauses) == v1::OFF_CPU_CAUSE_PAGE_FAULT + 1, "one name per OffCpuCause");
  return cause < std::size(kCauses) ? kCauses[cause] : "unknown";
}

// The waker -> wakee arrow of a voluntary switch whose waker is a thread of
// a process with events: an instant on the waker's thread at the wakeup and
// one on the wakee's off-CPU track.
absl::Status EmitWakeup(const v1::Event& event, uint32_t offcpu_track, MapContext& context) {
  const v1::OffCpu& off = event.off_cpu();
  if (!off.voluntary() || off.woken_by_tid() == 0 || off.woken_by_tid() == event.tid() ||
      !context.Seen(off.waker_pid())) {
    return absl::OkStatus();
  }
  const uint64_t wake = event.ts_ns() + off.duration_ns() - std::min(off.runqueue_ns(), off.duration_ns());
  // splitmix64 of (tid, switch-out time), salted apart from launch flows.
  uint64_t z = ((static_cast<uint64_t>(event.tid()) << 32) ^ event.ts_ns()) * 0x9e3779b97f4a7c15ull + 0x5bd1e995ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const uint64_t id = z == 0 ? 1 : z;
  // Both ends, the waker's first: the flow starts before it ends.
  const uint32_t waker_track = context.tracks().Thread(off.waker_pid(), off.woken_by_tid());
  if (absl::Status s = context.Emit<WakeupKind>(MapContext::Span(wake, 0, off.waker_pid()), waker_track,
                                                context.FixedName(WakeupKind::kKind, 0),
                                                {id, event.tid(), 0});
      !s.ok()) {
    return s;
  }
  return context.Emit<WakeupKind>(MapContext::Span(wake, 0, event.pid()), offcpu_track,
                                  context.FixedName(WakeupKind::kKind, 1), {id, off.woken_by_tid(), 1});
}

}  // namespace

absl::Status OffCpuKind::Map(const v1::Event& event, MapContext& context) {
  const v1::OffCpu& off = event.off_cpu();
  const uint32_t pid = event.pid();
  const uint32_t tid = event.tid() != 0 ? event.tid() : pid;
  const uint32_t track = context.tracks().ThreadChild(pid, tid, TrackKind::kThreadOffCpu);
  const uint32_t cause = static_cast<uint32_t>(off.cause());
  const Payload payload{off.runqueue_ns(),
                        static_cast<int64_t>(off.prev_state()),
                        context.tracks().Counter(CounterKind::kContextSwitchesPerSecond, pid),
                        cause,
                        off.syscall_nr(),
                        off.woken_by_tid(),
                        off.voluntary(),
                        0};
  if (absl::Status s = context.Emit<OffCpuKind>(MapContext::At(event, off.duration_ns()), track,
                                                context.FixedName(kKind, cause), payload);
      !s.ok()) {
    return s;
  }
  return EmitWakeup(event, track, context);
}

void OffCpuKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.String("cause", OffCpuCauseName(p.cause));
  if (p.syscall_nr >= 0) {
    auto it = args.header().syscall_names().find(p.syscall_nr);
    if (it != args.header().syscall_names().end()) {
      args.String("syscall", it->second);
    } else {
      args.Int("syscall_nr", p.syscall_nr);
    }
  }
  args.Uint("runqueue_ns", p.runqueue_ns);
  args.Bool("voluntary", p.voluntary != 0);
  args.Int("prev_state", p.prev_state);
  if (p.woken_by_tid != 0) args.Uint("woken_by_tid", p.woken_by_tid);
}

void WakeupKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Uint(p.is_wakee ? "waker_tid" : "wakee_tid", p.other_tid);
}

absl::Status MmapKind::Map(const v1::Event& event, MapContext& context) {
  const v1::MmapCall& call = event.mmap();
  const uint32_t tid = event.tid() != 0 ? event.tid() : event.pid();
  return context.Emit<MmapKind>(MapContext::At(event, call.duration_ns()),
                                context.tracks().ThreadChild(event.pid(), tid, TrackKind::kThreadOs),
                                context.FixedName(kKind, 0),
                                {call.addr(), call.length(), call.result(), call.prot(), call.flags(),
                                 call.fd(), 0});
}

void MmapKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Pointer("addr", p.addr);
  args.Uint("length", p.length);
  args.Uint("prot", p.prot);
  args.Uint("flags", p.flags);
  args.Int("fd", p.fd);
  args.Int("result", p.result);
}

absl::Status MunmapKind::Map(const v1::Event& event, MapContext& context) {
  const v1::MunmapCall& call = event.munmap();
  const uint32_t tid = event.tid() != 0 ? event.tid() : event.pid();
  return context.Emit<MunmapKind>(MapContext::At(event, call.duration_ns()),
                                  context.tracks().ThreadChild(event.pid(), tid, TrackKind::kThreadOs),
                                  context.FixedName(kKind, 0), {call.addr(), call.length(), call.result()});
}

void MunmapKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Pointer("addr", p.addr);
  args.Uint("length", p.length);
  args.Int("result", p.result);
}

absl::Status FutexWaitKind::Map(const v1::Event& event, MapContext& context) {
  const v1::FutexWait& wait = event.futex_wait();
  const uint32_t tid = event.tid() != 0 ? event.tid() : event.pid();
  return context.Emit<FutexWaitKind>(MapContext::At(event, wait.duration_ns()),
                                     context.tracks().ThreadChild(event.pid(), tid, TrackKind::kThreadOs),
                                     context.FixedName(kKind, 0),
                                     {wait.uaddr(), wait.result(), wait.op(), wait.has_timeout()});
}

void FutexWaitKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Pointer("uaddr", p.uaddr);
  args.Uint("op", p.op);
  args.Bool("has_timeout", p.has_timeout != 0);
  args.Int("result", p.result);
}

absl::Status PageFaultsKind::Map(const v1::Event& event, MapContext& context) {
  const v1::PageFaults& faults = event.page_faults();
  const uint32_t tid = event.tid() != 0 ? event.tid() : event.pid();
  const uint32_t counter = context.tracks().Counter(CounterKind::kPageFaultsPerSecond, event.pid());
  context.tracks().Thread(event.pid(), tid);
  return context.Emit<PageFaultsKind>(MapContext::At(event, 0), counter, context.FixedName(kKind, 0),
                                      {std::max(faults.last_ns(), event.ts_ns()), faults.count(), faults.major()});
}

void PageFaultsKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Uint("count", p.count);
  args.Uint("major", p.major);
}

}  // namespace gpuos
