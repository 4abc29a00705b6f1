// SPDX-License-Identifier: GPL-2.0
/* The floor under issue #2's per-syscall requirement: the least a tracer on
 * the raw syscall tracepoints must do to keep, in the kernel, the count,
 * total and max latency of every syscall per thread of a process tree, and
 * nothing else.  A bitmap of traced processes (a tree's processes need a
 * set; new ones join in task_newtask), one clock read on each side, and a
 * per-thread array of per-syscall totals, found by tid modulo its size (a
 * thread whose entry another holds is not counted: fine for a one-thread
 * benchmark, wrong for a tracer).  bench/compare_tracers.sh sets gpuos-trace
 * against it; the difference is what gpuos-trace's own extras cost (its
 * mmap/munmap and futex call records, slots that never collide, exits and
 * execs handled).  The programs carry gpuos-trace's names so that the
 * scripts that read per-program run times (bpf_stats) find them. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define PID_LIMIT (1 << 22)
#define THREADS 1024
#define SYSCALL_NRS 512

struct call_totals {
	__u64 calls;
	__u64 total_ns;
	__u64 max_ns;
};

struct thread_calls {
	__u32 tid;
	__s32 nr;
	__u64 start_ns;
	struct call_totals per_nr[SYSCALL_NRS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PID_LIMIT / 64);
	__type(key, __u32);
	__type(value, __u64);
} traced_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, THREADS);
	__type(key, __u32);
	__type(value, struct thread_calls);
} threads SEC(".maps");

static __always_inline __u64 *tgid_word(__u32 tgid)
{
	__u32 index = tgid / 64;

	return bpf_map_lookup_elem(&traced_tgids, &index);
}

static __always_inline int is_traced(__u32 tgid)
{
	__u64 *word = tgid_word(tgid);

	return word && ((*word >> (tgid % 64)) & 1);
}

/* The current thread's entry, or NULL (untraced, or its entry is taken). */
static __always_inline struct thread_calls *current_calls(__u64 id)
{
	if (!is_traced(id >> 32))
		return NULL;
	__u32 tid = (__u32)id;
	__u32 index = tid % THREADS;
	struct thread_calls *t = bpf_map_lookup_elem(&threads, &index);

	if (!t)
		return NULL;
	if (t->tid != tid) {
		if (t->tid)
			return NULL;
		t->tid = tid;
	}
	return t;
}

SEC("tp_btf/task_newtask")
int BPF_PROG(follow_new_task, struct task_struct *task, __u64 clone_flags)
{
	if (!is_traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	__u32 tgid = task->tgid;
	__u64 *word = tgid_word(tgid);
	if (word)
		__sync_fetch_and_or(word, 1ULL << (tgid % 64));
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter, struct pt_regs *regs, long id)
{
	struct thread_calls *t = current_calls(bpf_get_current_pid_tgid());

	if (!t)
		return 0;
	t->start_ns = bpf_ktime_get_ns();
	t->nr = id;
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	struct thread_calls *t = current_calls(bpf_get_current_pid_tgid());

	if (!t || !t->start_ns)
		return 0;
	__u64 duration = bpf_ktime_get_ns() - t->start_ns;
	__u32 nr = t->nr;
	t->start_ns = 0;
	if (nr >= SYSCALL_NRS)
		return 0;
	struct call_totals *c = &t->per_nr[nr];
	c->calls++;
	c->total_ns += duration;
	if (duration > c->max_ns)
		c->max_ns = duration;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
