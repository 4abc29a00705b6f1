// SPDX-License-Identifier: GPL-2.0
/* Off-CPU intervals of traced threads.  At switch-out the thread's state,
 * time and cause are kept in its thread_state; a wakeup stamps the start of its
 * run-queue wait; at switch-in one off_cpu_event is sent.  The voluntary /
 * involuntary split follows the kernel's own nvcsw/nivcsw accounting in
 * __schedule(): voluntary means not preempted and prev_state != 0.
 *
 * These are BTF raw tracepoints: a perf-event tracepoint program is
 * skipped whenever any other such program runs on the CPU (one global
 * recursion guard), so a wakeup from an interrupt that lands inside, say,
 * the syscall programs was lost.  Raw tracepoint programs are only guarded
 * against themselves, and the BTF flavour gives typed task pointers, which
 * the task storage (thread_state) of the woken and the next task needs.
 * Arguments are sched_switch's since Linux 5.18.
 *
 * The waker is taken at sched_waking, which runs in try_to_wake_up() in the
 * waker's own context; sched_wakeup may run later on the wakee's CPU (the
 * ttwu wake list, from an IPI), where `current` is whatever ran there.  A
 * wakeup made from a hard or soft interrupt (a timer, an I/O completion)
 * is marked as such rather than blamed on the interrupted task (see
 * irq_depth below).  A wakeup from an interrupt that lands while a BPF
 * program on that CPU holds the task storage finds no thread_state
 * (nested task-storage access fails) and is not seen: that interval then
 * has no waker (waker_flags 0), as many sleepers expiring in one timer
 * interrupt show now and then. */
#include "common.bpf.h"
#include "mm_batch.bpf.h"
#include "offcpu.bpf.h"

#define GPUOS_TASK_STOPPED_OR_TRACED (0x4 | 0x8) /* __TASK_STOPPED, __TASK_TRACED */
#define GPUOS_TASK_DEAD 0x80                      /* the last switch-out of an exiting task */

/* Whether this CPU is running an interrupt handler, a softirq or an
 * hrtimer callback: a depth per CPU, raised and lowered by the tracepoints
 * around them.  The kernel's own preempt count would say it directly, but
 * reading the per-CPU __preempt_count needs its address from kallsyms,
 * which kernels without CONFIG_KALLSYMS_ALL (this one) do not list.  The
 * timer interrupt's wakeups (sleeps, futex timeouts) run in hrtimer
 * callbacks, device I/O completions in irq handlers or softirqs.  A depth
 * that an exit would take below 0 (attached while a handler ran) stays 0. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} irq_depth SEC(".maps");

static __always_inline int irq_enter(void)
{
	__u32 key = 0;
	__u32 *depth = bpf_map_lookup_elem(&irq_depth, &key);
	if (depth)
		*depth += 1;
	return 0;
}

static __always_inline int irq_exit(void)
{
	__u32 key = 0;
	__u32 *depth = bpf_map_lookup_elem(&irq_depth, &key);
	if (depth && *depth)
		*depth -= 1;
	return 0;
}

static __always_inline int in_interrupt_handler(void)
{
	__u32 key = 0;
	__u32 *depth = bpf_map_lookup_elem(&irq_depth, &key);
	return depth && *depth;
}

/* No context switch happens inside an interrupt handler: whatever depth a
 * switch finds is left over (an exit the kernel skipped because the same
 * program was already running on the CPU), and is cleared. */
static __always_inline void irq_depth_reset(void)
{
	__u32 key = 0;
	__u32 *depth = bpf_map_lookup_elem(&irq_depth, &key);
	if (depth && *depth)
		*depth = 0;
}

/* The exits first: programs are attached in this order, and an entry
 * attached before its exit could count a handler that never leaves. */
SEC("tp_btf/irq_handler_exit")
int BPF_PROG(handle_irq_exit) { return irq_exit(); }
SEC("tp_btf/softirq_exit")
int BPF_PROG(handle_softirq_exit) { return irq_exit(); }
SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(handle_hrtimer_exit) { return irq_exit(); }
SEC("tp_btf/irq_handler_entry")
int BPF_PROG(handle_irq_entry) { return irq_enter(); }
SEC("tp_btf/softirq_entry")
int BPF_PROG(handle_softirq_entry) { return irq_enter(); }
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(handle_hrtimer_entry) { return irq_enter(); }

static __always_inline int in_syscall(struct gpuos_thread_state *t, struct gpuos_syscall_slot *s,
				      __s32 *nr)
{
	if (s && s->call_start_ns) {
		*nr = s->call_nr;
		return 1;
	}
	if (t->syscall.start_ns) {
		*nr = t->syscall.nr;
		return 1;
	}
	return 0;
}

static __always_inline __u32 blocked_cause(struct gpuos_thread_state *t,
					   struct gpuos_syscall_slot *s, __s64 prev_state, __s32 *nr)
{
	*nr = -1;
	if (in_syscall(t, s, nr)) {
		if (*nr == nr_futex || *nr == nr_futex_waitv || *nr == nr_futex_wait)
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

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* Read only when a traced thread is involved: most switches of the
	 * machine are other threads'. */
	__u64 now = 0;

	irq_depth_reset();

	/* Switch-out: the current task is prev. */
	if (prev->pid && !(prev_state & GPUOS_TASK_DEAD)) {
		struct gpuos_thread_state *t = current_thread_or_exiting();
		if (t) {
			now = bpf_ktime_get_ns();
			int voluntary = !preempt && prev_state != 0;
			struct gpuos_sched_state *st = &t->sched;
			struct gpuos_syscall_slot *s = owned_slot(tid_slot_ref(prev->pid), prev->pid);
			/* The kernel brought its run time up to date before this
			 * tracepoint (update_curr at dequeue or put_prev). */
			__u64 run_ns = prev->se.sum_exec_runtime;
			/* Still open: it came back with no tracepoint, and made
			 * no syscall since (offcpu.h).  Run once since, it came
			 * back the run time since ago. */
			if (st->switched_out_ns) {
				__u64 ran_ns = run_ns - st->run_ns_at_switch_out;
				send_interval(st, prev->pid, ran_ns < now ? now - ran_ns : 0, GPUOS_END_RUN_TIME);
			}
			st->switched_out_ns = now;
			st->run_ns_at_switch_out = run_ns;
			if (s)
				s->off_cpu_open = 1;
			st->woken_ns = 0;
			/* A waker that came before this switch-out (see
			 * handle_sched_waking) ended this very sleep. */
			if (!voluntary || !(st->waker_flags & GPUOS_WAKER_EARLY)) {
				st->woken_by_tid = 0;
				st->waker_pid = 0;
				st->waker_flags = 0;
			}
			st->prev_state = prev_state;
			st->pid = t->pid;
			if (voluntary) {
				/* A thread that blocks sends its finished mmap/munmap
				 * calls: it may stay off CPU for long. */
				if (s && s->mm_batch.count)
					mm_batch_flush(s);
				st->cause = blocked_cause(t, s, prev_state, &st->syscall_nr);
			} else {
				st->cause = GPUOS_OFFCPU_PREEMPTED;
				st->syscall_nr = -1;
			}
		}
	}

	/* Switch-in: a thread with a kept state is a traced one. */
	struct gpuos_thread_state *t = traced_task(next);
	if (!t || !t->sched.switched_out_ns)
		return 0;
	send_interval(&t->sched, next->pid, now ? now : bpf_ktime_get_ns(), GPUOS_END_SWITCH_IN);
	struct gpuos_syscall_slot *s = owned_slot(tid_slot_ref(next->pid), next->pid);
	if (s)
		s->off_cpu_open = 0;
	return 0;
}

/* In the waker's context: who woke the thread.  One per sleep: once the
 * state matched, later wakers find the task waking and fire no event. */
SEC("tp_btf/sched_waking")
int BPF_PROG(handle_sched_waking, struct task_struct *task)
{
	struct gpuos_thread_state *t = traced_task(task);

	if (!t || t->sched.waker_flags)
		return 0;
	__u32 flags = GPUOS_WAKER_CONTEXT_KNOWN;
	if (!t->sched.switched_out_ns) {
		/* Not switched out yet.  Off the run queue, it is inside
		 * __schedule() on its CPU, before the sched_switch tracepoint:
		 * a waker on another CPU got there first, and ends the sleep
		 * that switch-out begins.  On the run queue (or the waker
		 * itself), the sleep is called off and there is no switch. */
		if (task->on_rq || task == bpf_get_current_task_btf())
			return 0;
		flags |= GPUOS_WAKER_EARLY;
	}
	if (in_interrupt_handler())
		flags |= GPUOS_WAKER_INTERRUPT;
	if (!(flags & GPUOS_WAKER_INTERRUPT)) {
		__u64 id = bpf_get_current_pid_tgid();
		t->sched.woken_by_tid = (__u32)id;
		t->sched.waker_pid = (__u32)(id >> 32);
	}
	t->sched.waker_flags = flags | GPUOS_WAKER_SEEN;
	return 0;
}

/* Where the run-queue wait starts; may run on the wakee's CPU. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(handle_sched_wakeup, struct task_struct *task)
{
	struct gpuos_thread_state *t = traced_task(task);

	if (t && t->sched.switched_out_ns && !t->sched.woken_ns)
		t->sched.woken_ns = bpf_ktime_get_ns();
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
