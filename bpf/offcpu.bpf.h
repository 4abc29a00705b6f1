/* Sending a traced thread's off-CPU interval (offcpu.h), shared by the
 * scheduler's programs (offcpu.bpf.c), which open and close it, and the
 * syscall programs (syscalls.bpf.c), which close one whose switch-in the
 * kernel never traced at the first syscall entry or exit they see. */
#ifndef GPUOS_BPF_OFFCPU_BPF_H
#define GPUOS_BPF_OFFCPU_BPF_H
#include "common.bpf.h"
#include "offcpu.h"

/* Sends the open interval of thread `tid` and closes it at end_ns, known
 * as `how` says; never before its switch-out or its wakeup. */
static __always_inline void send_interval(struct gpuos_sched_state *st, __u32 tid, __u64 end_ns,
					  enum gpuos_interval_end how)
{
	__u64 start_ns = st->switched_out_ns;

	/* Closed meanwhile (a syscall program preempted between its check
	 * and this call, the switch-in traced in between). */
	if (!start_ns)
		return;
	if (end_ns < start_ns)
		end_ns = start_ns;
	if (end_ns < st->woken_ns)
		end_ns = st->woken_ns;
	struct gpuos_off_cpu_event *e = reserve_event(sizeof(*e), GPUOS_EV_OFF_CPU, start_ns, st->pid, tid);
	if (e) {
		int voluntary = st->cause != GPUOS_OFFCPU_PREEMPTED;
		e->duration_ns = end_ns - start_ns;
		if (!voluntary)
			e->runqueue_ns = e->duration_ns;
		else if (st->woken_ns && st->woken_ns <= end_ns)
			e->runqueue_ns = end_ns - st->woken_ns;
		else
			e->runqueue_ns = 0;
		e->prev_state = st->prev_state;
		e->syscall_nr = st->syscall_nr;
		e->cause = st->cause;
		e->voluntary = voluntary;
		e->woken_by_tid = st->woken_by_tid;
		e->waker_pid = st->waker_pid;
		e->waker_flags = st->waker_flags;
		e->end_how = how;
		submit_event(e);
	}
	st->switched_out_ns = 0;
	/* The waker belonged to the interval that just ended.  Kept, an early
	 * waker's flags would make the next sleep's switch-out keep it too and
	 * sched_waking skip that sleep's real waker (a timer's wakeup blamed
	 * on the thread that woke the previous sleep). */
	st->woken_by_tid = 0;
	st->waker_pid = 0;
	st->waker_flags = 0;
}

/* At a syscall entry or exit of the current (traced) thread, with its slot
 * s or, without one, its state t: it runs, so an interval still open lost
 * its switch-in, and ended by now.  The slot's off_cpu_open mirrors the
 * state's switched_out_ns, so a thread with a slot pays no task-storage
 * lookup for this. */
static __always_inline void close_unseen_switch_in(struct gpuos_syscall_slot *s, struct gpuos_thread_state *t,
						   __u64 pid_tgid, __u64 now)
{
	if (s) {
		if (!s->off_cpu_open)
			return;
		s->off_cpu_open = 0;
		t = bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(), 0, 0);
	}
	if (t && t->sched.switched_out_ns)
		send_interval(&t->sched, (__u32)pid_tgid, now, GPUOS_END_SEEN_RUNNING);
}

#endif
