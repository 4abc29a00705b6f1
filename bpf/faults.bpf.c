// SPDX-License-Identifier: GPL-2.0
/* User page faults of traced threads, counted in the kernel per thread and
 * sent as one record per window (fault_window_ns), per on-CPU stretch and
 * at thread exit: a fault costs a few stores into the thread's task
 * storage (thread_state), not a ring-buffer record, yet every fault stays
 * attributed to a short interval. */
#include "common.bpf.h"
#include "faults.h"

static __always_inline __u64 current_maj_flt(void)
{
	return bpf_get_current_task_btf()->maj_flt;
}

/* Sends the window's count and starts a new, empty one. */
static __always_inline void flush(struct gpuos_fault_state *st, __u32 tid)
{
	__u64 maj = current_maj_flt();
	struct gpuos_page_fault_event *e =
		reserve_event(sizeof(*e), GPUOS_EV_PAGE_FAULTS, st->first_ns, st->pid, tid);

	if (e) {
		e->last_ns = st->last_ns;
		e->count = st->count;
		e->major = maj - st->maj_flt_at_start;
		submit_event(e);
	}
	st->count = 0;
	/* Carried over, not re-read at the next fault: a major fault still in
	 * progress at this flush is accounted to the next window. */
	st->maj_flt_at_start = maj;
}

/* A BTF raw tracepoint: no perf trace record is built for it, and it is
 * never skipped because another program runs on the CPU. */
SEC("tp_btf/page_fault_user")
int BPF_PROG(handle_page_fault_user)
{
	struct gpuos_thread_state *t = current_thread();

	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct gpuos_fault_state *st = &t->fault;
	if (!st->pid) {
		/* The thread's first fault: the major-fault baseline. */
		st->pid = t->pid;
		st->maj_flt_at_start = current_maj_flt();
	}
	if (st->count && now - st->first_ns > fault_window_ns)
		flush(st, (__u32)bpf_get_current_pid_tgid());
	if (!st->count)
		st->first_ns = now;
	st->count++;
	st->last_ns = now;
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_fault_switch, bool preempt, struct task_struct *prev)
{
	struct gpuos_thread_state *t = traced_task(prev);

	if (t && t->fault.count)
		flush(&t->fault, prev->pid);
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int handle_fault_exit(void *ctx)
{
	struct gpuos_thread_state *t = traced_thread(bpf_get_current_task_btf());

	if (t && t->fault.count)
		flush(&t->fault, (__u32)bpf_get_current_pid_tgid());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
