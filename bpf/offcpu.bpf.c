// SPDX-License-Identifier: GPL-2.0
/* Off-CPU intervals of traced threads.  At switch-out the thread's state,
 * time and cause are kept in sched_state; a wakeup stamps the start of its
 * run-queue wait; at switch-in one off_cpu_event is sent.  The voluntary /
 * involuntary split follows the kernel's own nvcsw/nivcsw accounting in
 * __schedule(): voluntary means not preempted and prev_state != 0.
 *
 * These are raw tracepoints: a perf-event tracepoint program is skipped
 * whenever any other such program runs on the CPU (one global recursion
 * guard), so a wakeup from an interrupt that lands inside, say, the syscall
 * programs was lost.  Raw tracepoint programs are only guarded against
 * themselves.  Arguments are sched_switch's since Linux 5.18:
 * (bool preempt, struct task_struct *prev, struct task_struct *next,
 * unsigned int prev_state). */
#include "common.bpf.h"
#include "offcpu.h"

#define GPUOS_TASK_STOPPED_OR_TRACED (0x4 | 0x8) /* __TASK_STOPPED, __TASK_TRACED */
#define GPUOS_TASK_DEAD 0x80                      /* the last switch-out of an exiting task */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct gpuos_sched_state);
} sched_state SEC(".maps");

static __always_inline __u32 blocked_cause(__u32 tid, __s64 prev_state, __s32 *nr)
{
	struct gpuos_syscall_call *sc = bpf_map_lookup_elem(&syscall_in_flight, &tid);

	*nr = -1;
	if (sc && sc->start_ns) {
		*nr = sc->nr;
		if (sc->nr == nr_futex || sc->nr == nr_futex_waitv || sc->nr == nr_futex_wait)
			return GPUOS_OFFCPU_FUTEX;
		return GPUOS_OFFCPU_SYSCALL;
	}
	if (prev_state & GPUOS_TASK_STOPPED_OR_TRACED)
		return GPUOS_OFFCPU_UNKNOWN;
	/* Sleeping outside any syscall: the kernel blocked in an exception
	 * handler on the thread's behalf, which in user context is a page fault
	 * (reading the page in, or waiting on a page lock). */
	return GPUOS_OFFCPU_PAGE_FAULT;
}

SEC("raw_tp/sched_switch")
int handle_sched_switch(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	bool preempt = (bool)ctx->args[0];
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__s64 prev_state = (__u32)ctx->args[3];
	__u32 prev_tid = BPF_CORE_READ(prev, pid);
	__u32 next_tid = BPF_CORE_READ(next, pid);

	/* Switch-out: the current task is prev. */
	if (prev_tid) {
		__u32 tid;
		__u32 pid = current_tracked_pid(&tid);
		if (pid && !(prev_state & GPUOS_TASK_DEAD)) {
			int voluntary = !preempt && prev_state != 0;
			struct gpuos_sched_state st = {
				.switched_out_ns = now,
				.prev_state = prev_state,
				.pid = pid,
			};
			if (voluntary) {
				st.cause = blocked_cause(prev_tid, prev_state, &st.syscall_nr);
			} else {
				st.cause = GPUOS_OFFCPU_PREEMPTED;
				st.syscall_nr = -1;
			}
			if (bpf_map_update_elem(&sched_state, &prev_tid, &st, BPF_ANY))
				count_map_full(GPUOS_MAP_SCHED_STATE);
		}
	}

	/* Switch-in: any thread with a kept state is a traced one. */
	struct gpuos_sched_state *st = bpf_map_lookup_elem(&sched_state, &next_tid);
	if (!st)
		return 0;
	struct gpuos_off_cpu_event *e = reserve_event(sizeof(*e), GPUOS_EV_OFF_CPU, st->switched_out_ns,
						st->pid, next_tid);
	if (e) {
		int voluntary = st->cause != GPUOS_OFFCPU_PREEMPTED;
		e->duration_ns = now - st->switched_out_ns;
		if (!voluntary)
			e->runqueue_ns = e->duration_ns;
		else if (st->woken_ns)
			e->runqueue_ns = now - st->woken_ns;
		else
			e->runqueue_ns = 0;
		e->prev_state = st->prev_state;
		e->syscall_nr = st->syscall_nr;
		e->cause = st->cause;
		e->voluntary = voluntary;
		e->woken_by_tid = st->woken_by_tid;
		submit_event(e);
	}
	bpf_map_delete_elem(&sched_state, &next_tid);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int handle_sched_wakeup(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	__u32 tid = BPF_CORE_READ(task, pid);
	struct gpuos_sched_state *st = bpf_map_lookup_elem(&sched_state, &tid);

	if (st && !st->woken_ns) {
		st->woken_ns = bpf_ktime_get_ns();
		st->woken_by_tid = (__u32)bpf_get_current_pid_tgid();
	}
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int handle_sched_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&sched_state, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
