// The off-CPU source: bpf/offcpu.bpf.c (intervals traced threads spend off
// the CPU, with run-queue wait, cause and waker; bpf/offcpu.h) and its
// records' decoding.
#include "bpf/offcpu.h"
#include "common/syscall_names.h"
#include "offcpu.skel.h"
#include "record/sources/skeleton_source.h"

namespace gpuos {
namespace {

class OffCpuSource : public SkeletonSource<offcpu_bpf, offcpu_bpf__open_opts, offcpu_bpf__destroy> {
 public:
  OffCpuSource() : SkeletonSource("offcpu") {}

 private:
  absl::Status Configure(const BpfSourceSetup& setup) override {
    skel()->rodata->wakeup_bytes = setup.wakeup_bytes;
    // The syscalls blocking causes are named by.
    skel()->rodata->nr_futex = SyscallNumber("futex");
    skel()->rodata->nr_futex_waitv = SyscallNumber("futex_waitv");
    skel()->rodata->nr_futex_wait = SyscallNumber("futex_wait");
    skel()->rodata->nr_futex_wake = SyscallNumber("futex_wake");
    return absl::OkStatus();
  }
};

bool DecodeOffCpu(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_off_cpu_event>(data, size);
  if (!e) return false;
  auto* o = event->mutable_off_cpu();
  o->set_duration_ns(e->duration_ns);
  o->set_runqueue_ns(e->runqueue_ns);
  o->set_cause(e->cause <= GPUOS_OFFCPU_PAGE_FAULT ? static_cast<v1::OffCpuCause>(e->cause)
                                                   : v1::OFF_CPU_CAUSE_UNKNOWN);
  o->set_syscall_nr(e->syscall_nr);
  o->set_voluntary(e->voluntary != 0);
  o->set_prev_state(e->prev_state);
  o->set_woken_by_tid(e->woken_by_tid);
  o->set_waker_pid(e->waker_pid);
  o->set_woken_from_interrupt((e->waker_flags & GPUOS_WAKER_INTERRUPT) != 0);
  o->set_waker_context_known((e->waker_flags & GPUOS_WAKER_CONTEXT_KNOWN) != 0);
  o->set_switch_in_unseen(e->end_how != GPUOS_END_SWITCH_IN);
  o->set_end_seen_running(e->end_how == GPUOS_END_SEEN_RUNNING);
  o->set_end_from_run_time(e->end_how == GPUOS_END_RUN_TIME);
  emit(*event);
  return true;
}

}  // namespace

extern const BpfSourceModule kOffCpuSource = {
    "offcpu",
    {{GPUOS_EV_OFF_CPU, "off_cpu", DecodeOffCpu}},
    {{GPUOS_MAP_SCHED_STATE, "sched_state"}},
    []() -> std::unique_ptr<BpfSource> { return std::make_unique<OffCpuSource>(); },
};

}  // namespace gpuos
