/* Maps and helpers shared by every gpuos-trace BPF program.  Each object
 * declares these maps; the agent creates them once (in the first object it
 * loads) and hands the same fds to the others with bpf_map__reuse_fd(), so
 * all programs see one tracked-process set, one ring buffer and one set of
 * drop counters. */
#ifndef GPUOS_COMMON_BPF_H
#define GPUOS_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "event_header.h"
#include "syscalls.h"

/* Defaults; the agent may resize before load. */
#define GPUOS_MAX_PROCESSES 16384
#define GPUOS_MAX_THREADS 65536

/* Thread group ids of the traced tree.  The value is unused (1). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_PROCESSES);
	__type(key, __u32);
	__type(value, __u8);
} tracked_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* Why events were lost (enum gpuos_drop_reason). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GPUOS_DROP_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} drop_counts SEC(".maps");

/* The syscall each traced thread is inside (written by syscalls.bpf.c,
 * read by offcpu.bpf.c to name the cause of a blocked interval). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct gpuos_syscall_call);
} syscall_in_flight SEC(".maps");

/* Set by the agent before load. */
const volatile __u64 fault_window_ns = 1000000;
/* The agent is woken only once this much data waits in the ring buffer; in
 * between it drains on its own timer.  Waking it for every record would make
 * the agent preempt the traced threads once per event they cause, a
 * feedback loop that multiplied the cost of tracing (docs/benchmarks.md). */
const volatile __u64 wakeup_bytes = 1 << 20;

static __always_inline int is_tracked(__u32 pid)
{
	return bpf_map_lookup_elem(&tracked_pids, &pid) != NULL;
}

/* The current thread's pid (tgid) if it belongs to the traced tree, else 0. */
static __always_inline __u32 current_tracked_pid(__u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;

	if (!is_tracked(pid))
		return 0;
	*tid = (__u32)id;
	return pid;
}

static __always_inline void count_drop(__u32 slot)
{
	__u64 *count = bpf_map_lookup_elem(&drop_counts, &slot);

	if (count)
		(*count)++;
}

static __always_inline void count_map_full(__u32 map_id)
{
	count_drop(GPUOS_DROP_MAP_FULL_BASE + map_id);
}

/* Reserves a ring-buffer record and fills its header; counts the drop and
 * returns NULL when the buffer is full. */
static __always_inline void *reserve_event(__u64 size, __u32 kind, __u64 ts_ns, __u32 pid, __u32 tid)
{
	struct gpuos_event_header *hdr = bpf_ringbuf_reserve(&events, size, 0);

	if (!hdr) {
		count_drop(GPUOS_DROP_RINGBUF_FULL + kind);
		return NULL;
	}
	hdr->ts_ns = ts_ns;
	hdr->pid = pid;
	hdr->tid = tid;
	hdr->kind = kind;
	hdr->cpu = bpf_get_smp_processor_id();
	return hdr;
}

/* Syscall numbers of this kernel's architecture, set by the agent (-1: the
 * syscall does not exist here). */
const volatile __s32 nr_futex = -1;
const volatile __s32 nr_futex_waitv = -1;
const volatile __s32 nr_futex_wait = -1;
const volatile __s32 nr_futex_wake = -1;

/* Submits a reserved record, waking the agent only when enough data waits. */
static __always_inline void submit_event(void *event)
{
	__u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(event, waiting >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

#endif
