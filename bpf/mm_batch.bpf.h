/* Sending a thread's batch of finished mmap/munmap calls (mm.h): from the
 * syscall exit that fills it (mm.bpf.h), the voluntary switch-out of its
 * thread (offcpu.bpf.c) and the slot's return (syscalls.bpf.c). */
#ifndef GPUOS_MM_BATCH_BPF_H
#define GPUOS_MM_BATCH_BPF_H

#include "common.bpf.h"
#include "mm.h"
#include "syscalls.h"

/* Sends slot s's pending calls, if any, as one record cut after the last
 * call, and empties the batch.  A record that finds the ring buffer full
 * counts each of its calls as a dropped mmap or munmap event. */
static __always_inline void mm_batch_flush(struct gpuos_syscall_slot *s)
{
	struct gpuos_mm_calls_event *b = &s->mm_batch;
	__u32 count = b->count;

	if (!count)
		return;
	if (count > GPUOS_MM_BATCH)
		count = GPUOS_MM_BATCH;
	b->hdr.pid = s->pid;
	b->hdr.tid = s->tid;
	b->hdr.kind = GPUOS_EV_MM_CALLS;
	b->hdr.cpu = bpf_get_smp_processor_id();
	__u64 size = __builtin_offsetof(struct gpuos_mm_calls_event, calls) +
		     (__u64)count * sizeof(struct gpuos_mm_record);
	__u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	if (bpf_ringbuf_output(&events, b, size,
			       waiting >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP)) {
		for (__u32 i = 0; i < GPUOS_MM_BATCH; i++) {
			if (i >= count)
				break;
			count_drop(GPUOS_DROP_RINGBUF_FULL +
				   (b->calls[i].is_munmap ? GPUOS_EV_MUNMAP : GPUOS_EV_MMAP));
		}
	}
	b->count = 0;
}

#endif
