/* mmap and munmap calls of traced threads: one record per call with its
 * entry time, duration, length and result.  Large pageable copies and
 * allocator churn show up here (a cudaMemcpy from pageable memory, a
 * DataLoader batch freed with munmap).  Called from syscalls.bpf.c's
 * sys_enter/sys_exit programs, which every syscall runs anyway: on mmap's
 * and munmap's own tracepoints these were two more programs per call, and
 * their perf-event hooks ran on every syscall of the machine
 * (docs/benchmarks.md, 2026-11-22). */
#ifndef GPUOS_MM_BPF_H
#define GPUOS_MM_BPF_H

#include "common.bpf.h"
#include "mm.h"

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

static __always_inline void mm_leave(struct gpuos_mm_call *call, long ret, __u64 now, __u64 id)
{
	__u32 kind = call->is_munmap ? GPUOS_EV_MUNMAP : GPUOS_EV_MMAP;
	struct gpuos_mm_event *e = reserve_event(sizeof(*e), kind, call->start_ns, id >> 32, (__u32)id);

	if (e) {
		e->duration_ns = now - call->start_ns;
		e->addr = call->addr;
		e->length = call->length;
		e->result = ret;
		e->prot = call->prot;
		e->flags = call->flags;
		e->fd = call->fd;
		e->pad = 0;
		submit_event(e);
	}
	call->start_ns = 0;
}

#endif
