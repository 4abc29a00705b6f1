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
 * is marked as such rather than blamed on the interrupted task. */
#include "common.bpf.h"
#include "mm_batch.bpf.h"
#include "offcpu.h"

#define GPUOS_TASK_STOPPED_OR_TRACED (0x4 | 0x8) /* __TASK_STOPPED, __TASK_TRACED */
#define GPUOS_TASK_DEAD 0x80                      /* the last switch-out of an exiting task */

/* The preempt count's interrupt bits (include/linux/preempt.h): serving a
 * softirq (not merely softirqs disabled), in a hard interrupt, in an NMI. */
#define GPUOS_SOFTIRQ_OFFSET 0x100
#define GPUOS_HARDIRQ_MASK 0xf0000
#define GPUOS_NMI_MASK 0xf00000

/* x86's preempt count is the per-CPU __preempt_count (Linux 6.15 on, and
 * before 6.2), or a field of pcpu_hot (6.2 to 6.14); weak, so that a kernel
 * with neither still loads the program and only loses the interrupt mark. */
extern const int __preempt_count __ksym __weak;
struct pcpu_hot___gpuos {
	int preempt_count;
} __attribute__((preserve_access_index));
extern struct pcpu_hot___gpuos pcpu_hot __ksym __weak;

/* The preempt count of this CPU in *count; 0 when it cannot be read. */
static __always_inline int read_preempt_count(int *count)
{
#if defined(__TARGET_ARCH_x86)
	if (&__preempt_count) {
		*count = *(int *)bpf_this_cpu_ptr(&__preempt_count);
		return 1;
	}
	if (&pcpu_hot && bpf_core_field_exists(pcpu_hot.preempt_count)) {
		*count = ((struct pcpu_hot___gpuos *)bpf_this_cpu_ptr(&pcpu_hot))->preempt_count;
		return 1;
	}
#elif defined(__TARGET_ARCH_arm64)
	struct task_struct *task = bpf_get_current_task_btf();
	*count = BPF_CORE_READ(task, thread_info.preempt.count);
	return 1;
#endif
	return 0;
}

/* Whether a thread is inside a syscall (its number in *nr): the call in
 * flight is in the thread's syscall slot s, or in its state t when it has
 * none (syscalls.bpf.c). */
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

	/* Switch-out: the current task is prev. */
	if (prev->pid && !(prev_state & GPUOS_TASK_DEAD)) {
		struct gpuos_thread_state *t = current_thread_or_exiting();
		if (t) {
			now = bpf_ktime_get_ns();
			int voluntary = !preempt && prev_state != 0;
			struct gpuos_sched_state *st = &t->sched;
			st->switched_out_ns = now;
			st->woken_ns = 0;
			st->woken_by_tid = 0;
			st->waker_pid = 0;
			st->waker_flags = 0;
			st->prev_state = prev_state;
			st->pid = t->pid;
			if (voluntary) {
				struct gpuos_syscall_slot *s = owned_slot(tid_slot_ref(prev->pid), prev->pid);
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
	if (!now)
		now = bpf_ktime_get_ns();
	struct gpuos_sched_state *st = &t->sched;
	struct gpuos_off_cpu_event *e = reserve_event(sizeof(*e), GPUOS_EV_OFF_CPU, st->switched_out_ns,
						st->pid, next->pid);
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
		e->waker_pid = st->waker_pid;
		e->waker_flags = st->waker_flags;
		submit_event(e);
	}
	st->switched_out_ns = 0;
	return 0;
}

/* In the waker's context: who woke the thread.  One per sleep: once the
 * state matched, later wakers find the task waking and fire no event. */
SEC("tp_btf/sched_waking")
int BPF_PROG(handle_sched_waking, struct task_struct *task)
{
	struct gpuos_thread_state *t = traced_task(task);

	if (!t || !t->sched.switched_out_ns || t->sched.waker_flags)
		return 0;
	int count = 0;
	__u32 flags = 0;
	if (read_preempt_count(&count)) {
		flags |= GPUOS_WAKER_CONTEXT_KNOWN;
		if (count & (GPUOS_NMI_MASK | GPUOS_HARDIRQ_MASK | GPUOS_SOFTIRQ_OFFSET))
			flags |= GPUOS_WAKER_INTERRUPT;
	}
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
