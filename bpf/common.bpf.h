/* Maps and helpers shared by every gpuos-trace BPF program.  Each object
 * declares these maps; the agent creates them once (in the first object it
 * loads) and hands the same fds to the others with bpf_map__reuse_fd(), so
 * all programs see one tracked-process set, one per-thread state, one ring
 * buffer and one set of drop counters. */
#ifndef GPUOS_COMMON_BPF_H
#define GPUOS_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "event_header.h"
#include "syscalls.h"
#include "offcpu.h"
#include "faults.h"
#include "mm.h"
#include "futex.h"
#include "thread_state.h"

/* Defaults; the agent may resize before load. */
#define GPUOS_MAX_THREADS 65536

/* The thread group ids of the traced tree, one bit each: bit (pid % 64)
 * of word (pid / 64), for every pid below PID_MAX_LIMIT (4194304; the
 * bitmap takes 512 KiB).  The
 * one check every program makes for every thread of the machine, so it is
 * an array lookup the verifier inlines and a bit test: an untraced thread
 * costs no helper call and no per-thread storage.  Set by the agent for
 * the processes it starts or attaches to (through mmap, with an atomic
 * OR, since the kernel side sets and clears bits of the same words) and
 * by task_newtask for their children; cleared when a process exits. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, GPUOS_PID_LIMIT / 64);
	__type(key, __u32);
	__type(value, __u64);
} traced_tgids SEC(".maps");

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

/* The per-thread state (thread_state.h), in the thread's own task storage. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct gpuos_thread_state);
} thread_state SEC(".maps");

/* Per-thread syscall totals and the call in flight (bpf/syscalls.h),
 * shared with the scheduler program; the agent reads them through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, GPUOS_DEFAULT_SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, struct gpuos_syscall_slot);
} syscall_slots SEC(".maps");

/* Thread id -> slot (bpf/syscalls.h); the agent sizes it to pid_max. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GPUOS_PID_LIMIT / GPUOS_TIDS_PER_ENTRY);
	__type(key, __u32);
	__type(value, struct gpuos_tid_slots);
} tid_slots SEC(".maps");

/* Where thread tid's slot number is kept; NULL for a tid beyond the array
 * (such a thread keeps its syscall state in thread_state). */
static __always_inline __u16 *tid_slot_ref(__u32 tid)
{
	__u32 index = tid / GPUOS_TIDS_PER_ENTRY;
	struct gpuos_tid_slots *e = bpf_map_lookup_elem(&tid_slots, &index);

	return e ? &e->slot[tid % GPUOS_TIDS_PER_ENTRY] : NULL;
}

/* The slot that *ref names if thread tid owns it, else NULL. */
static __always_inline struct gpuos_syscall_slot *owned_slot(__u16 *ref, __u32 tid)
{
	if (!ref || !*ref || *ref == GPUOS_TID_NO_SLOT)
		return NULL;
	__u32 index = *ref - 1;
	struct gpuos_syscall_slot *s = bpf_map_lookup_elem(&syscall_slots, &index);

	return s && s->tid == tid ? s : NULL;
}

/* Set by the agent before load. */
const volatile __u64 fault_window_ns = 1000000;
/* The agent is woken only once this much data waits in the ring buffer; in
 * between it drains on its own timer.  Waking it for every record would make
 * the agent preempt the traced threads once per event they cause, a
 * feedback loop that multiplied the cost of tracing (docs/archive/benchmarks.md). */
const volatile __u64 wakeup_bytes = 1 << 20;

static __always_inline int is_tracked(__u32 pid)
{
	__u32 index = pid / 64;
	__u64 *word = bpf_map_lookup_elem(&traced_tgids, &index);

	return word && ((*word >> (pid % 64)) & 1);
}

/* Returns 0, or -1 for a pid beyond the bitmap. */
static __always_inline int set_tracked(__u32 pid, int tracked)
{
	__u32 index = pid / 64;
	__u64 *word = bpf_map_lookup_elem(&traced_tgids, &index);

	if (!word)
		return -1;
	if (tracked)
		__sync_fetch_and_or(word, 1ULL << (pid % 64));
	else
		__sync_fetch_and_and(word, ~(1ULL << (pid % 64)));
	return 0;
}

static __always_inline void count_drop(__u32 slot);

/* The state of the current thread if it belongs to the traced tree, else
 * NULL.  An untraced thread pays the bit test and nothing else; a traced
 * one gets its state made on its first event. */
static __always_inline struct gpuos_thread_state *current_thread_of(__u32 pid);

static __always_inline struct gpuos_thread_state *current_thread(void)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	if (!is_tracked(pid))
		return NULL;
	return current_thread_of(pid);
}

/* current_thread() for a caller that has just seen pid (the current
 * thread's process) in the traced set. */
static __always_inline struct gpuos_thread_state *current_thread_of(__u32 pid)
{
	struct gpuos_thread_state *st = bpf_task_storage_get(
		&thread_state, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count_drop(GPUOS_DROP_MAP_FULL_BASE + GPUOS_MAP_SYSCALL_IN_FLIGHT);
		return NULL;
	}
	if (!st->pid)
		st->pid = pid;
	return st;
}

#define GPUOS_PF_EXITING 0x00000004

/* The state of a thread already known to be traced (current or not), NULL
 * for any other: never creates one. */
static __always_inline struct gpuos_thread_state *traced_thread(struct task_struct *task)
{
	struct gpuos_thread_state *st = bpf_task_storage_get(&thread_state, task, 0, 0);

	return st && st->pid ? st : NULL;
}

/* traced_thread() for the scheduler's programs, which run for every
 * switch and wakeup of the machine: a task of an untraced process costs a
 * bit test, not a task-storage lookup.  An exiting task is looked up
 * anyway (see current_thread_or_exiting). */
static __always_inline struct gpuos_thread_state *traced_task(struct task_struct *task)
{
	if (!is_tracked(task->tgid) && !(task->flags & GPUOS_PF_EXITING))
		return NULL;
	return traced_thread(task);
}

/* current_thread(), and also a traced thread on its way out whose
 * process's bit is already clear: the thread that ends a process clears
 * it, and a sibling that decremented the live count earlier may reach its
 * own exit events later.  Only exiting threads pay the second lookup. */
static __always_inline struct gpuos_thread_state *current_thread_or_exiting(void)
{
	struct gpuos_thread_state *t = current_thread();

	if (t)
		return t;
	struct task_struct *task = bpf_get_current_task_btf();
	if (!(task->flags & GPUOS_PF_EXITING))
		return NULL;
	return traced_thread(task);
}

/* The current thread's pid (tgid) if it belongs to the traced tree, else 0. */
static __always_inline __u32 current_tracked_pid(__u32 *tid)
{
	struct gpuos_thread_state *st = current_thread();

	if (!st)
		return 0;
	*tid = (__u32)bpf_get_current_pid_tgid();
	return st->pid;
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
