/* mmap and munmap calls of traced threads: one record per call with its
 * entry time, duration, length and result.  Large pageable copies and
 * allocator churn show up here (a cudaMemcpy from pageable memory, a
 * DataLoader batch freed with munmap).  Called from syscalls.bpf.c's
 * sys_enter/sys_exit programs, which every syscall runs anyway: on mmap's
 * and munmap's own tracepoints they would be two more programs per call,
 * and those tracepoints' perf-event hooks run on every syscall of the
 * machine (docs/archive/benchmarks.md: "two programs per syscall"). */
#ifndef GPUOS_MM_BPF_H
#define GPUOS_MM_BPF_H

#include "common.bpf.h"
#include "mm.h"
#include "mm_batch.bpf.h"

/* Syscall numbers of this kernel's architecture, set by the agent. */
const volatile __s32 nr_mmap = -1;
const volatile __s32 nr_munmap = -1;

/* call: the thread's in-flight record, in its syscall slot or, for a
 * thread without one, its thread_state. */
static __always_inline void mm_enter(struct gpuos_mm_call *call, struct pt_regs *regs, __u64 now,
				     __u32 is_munmap)
{
	call->start_ns = now;
	call->addr = PT_REGS_PARM1_SYSCALL(regs);
	call->length = PT_REGS_PARM2_SYSCALL(regs);
	call->is_munmap = is_munmap;
	if (!is_munmap) {
		call->prot = PT_REGS_PARM3_SYSCALL(regs);
		call->flags = PT_REGS_PARM4_SYSCALL(regs);
		call->fd = (__s32)PT_REGS_PARM5_SYSCALL(regs);
	} else {
		call->prot = 0;
		call->flags = 0;
		call->fd = -1;
	}
}

/* How long a finished call may wait in its thread's batch before the
 * next call sends the batch (mm.h). */
const volatile __u64 mm_batch_window_ns = 1000000;

/* Fills r from the call in flight, which has returned ret, and ends it. */
static __always_inline void mm_finish(struct gpuos_mm_record *r, struct gpuos_mm_call *call,
				      long ret, __u64 now)
{
	r->start_ns = call->start_ns;
	r->duration_ns = now - call->start_ns;
	r->addr = call->addr;
	r->length = call->length;
	r->result = ret;
	r->prot = call->prot;
	r->flags = call->flags;
	r->fd = call->fd;
	r->is_munmap = call->is_munmap;
	call->start_ns = 0;
}

/* The call in flight in slot s has returned ret: added to the slot's
 * batch, which goes out when full or when its first call is older than
 * mm_batch_window_ns. */
static __always_inline void mm_leave_batched(struct gpuos_syscall_slot *s, long ret, __u64 now)
{
	struct gpuos_mm_calls_event *b = &s->mm_batch;
	__u32 i = b->count;

	if (i >= GPUOS_MM_BATCH) {
		mm_batch_flush(s);
		i = 0;
	}
	/* Keeps clang from dropping the bound the verifier needs below. */
	barrier_var(i);
	if (i >= GPUOS_MM_BATCH)
		return;
	if (i == 0)
		b->hdr.ts_ns = s->mm.start_ns;
	mm_finish(&b->calls[i], &s->mm, ret, now);
	b->count = i + 1;
	if (i + 1 == GPUOS_MM_BATCH || now - b->hdr.ts_ns >= mm_batch_window_ns)
		mm_batch_flush(s);
}

/* The same for a thread without a slot: one record per call. */
static __always_inline void mm_leave(struct gpuos_mm_call *call, long ret, __u64 now, __u64 id)
{
	__u32 kind = call->is_munmap ? GPUOS_EV_MUNMAP : GPUOS_EV_MMAP;
	struct gpuos_mm_event *e = reserve_event(sizeof(*e), kind, call->start_ns, id >> 32, (__u32)id);

	if (e) {
		mm_finish(&e->call, call, ret, now);
		submit_event(e);
	}
	call->start_ns = 0;
}

#endif
