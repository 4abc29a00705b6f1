/* Off-CPU intervals of traced threads, with run-queue wait and cause. */
#ifndef GPUOS_BPF_OFFCPU_H
#define GPUOS_BPF_OFFCPU_H
#include "event_header.h"

enum gpuos_off_cpu_cause {
	GPUOS_OFFCPU_UNKNOWN = 0,
	GPUOS_OFFCPU_PREEMPTED = 1,   /* switched out while runnable */
	GPUOS_OFFCPU_FUTEX = 2,       /* blocked inside futex()/futex_waitv() */
	GPUOS_OFFCPU_SYSCALL = 3,     /* blocked inside another syscall (syscall_nr) */
	GPUOS_OFFCPU_PAGE_FAULT = 4,  /* blocked outside any syscall after a user page fault */
};

/* How the wakeup that ended a blocked interval was made (sched_waking, in
 * the waker's context). */
enum gpuos_waker_flags {
	GPUOS_WAKER_INTERRUPT = 1,   /* from a hard or soft interrupt (timer expiry, I/O completion): no task woke it */
	GPUOS_WAKER_CONTEXT_KNOWN = 2, /* the interrupt tracepoints were on: GPUOS_WAKER_INTERRUPT is meaningful */
	GPUOS_WAKER_SEEN = 4,        /* sched_waking saw the wakeup */
	GPUOS_WAKER_EARLY = 8,       /* ... before the sleeper's own sched_switch had run (a remote waker) */
};

/* How an interval's end is known. */
enum gpuos_interval_end {
	GPUOS_END_SWITCH_IN = 0,     /* its switch-in, traced */
	GPUOS_END_SEEN_RUNNING = 1,  /* a syscall entry or exit it made, switched in by then */
	GPUOS_END_RUN_TIME = 2,      /* its next switch-out less its run time since */
};

/* One interval off the CPU: header.ts_ns is the switch-out time.  Sent at
 * switch-in.  runqueue_ns is the part of the interval spent runnable but not
 * running (from wakeup, or from switch-out when preempted).  On some
 * kernels (seen on 6.18 in a VM) a thread is now and then switched back in
 * with no sched_switch tracepoint at all (ftrace's own event misses it
 * too).  Such an interval is sent, at the first sign that the thread runs
 * again (end_how, enum gpuos_interval_end): its next
 * syscall entry or exit (duration_ns runs to there, an upper bound, and a
 * sleep in a syscall ends at that syscall's exit, right after the
 * switch-in), or else its next switch-out, where the thread's run time
 * since the interval began says when it came back (exact when it ran once
 * in between, else the last possible time), so that every switch the
 * tracepoint showed is counted. */
struct gpuos_off_cpu_event {
	struct gpuos_event_header hdr;
	__u64 duration_ns;
	__u64 runqueue_ns;
	__s64 prev_state;  /* the raw task state (__state) at switch-out; 0 = runnable */
	__s32 syscall_nr;  /* -1 when not in a syscall */
	__u32 cause;       /* enum gpuos_off_cpu_cause */
	__u32 voluntary;   /* 1 = blocked, 0 = preempted */
	__u32 woken_by_tid; /* the thread that woke it, 0 when not known or woken from an interrupt */
	__u32 waker_pid;    /* woken_by_tid's thread group id, 0 when not known */
	__u32 waker_flags;  /* enum gpuos_waker_flags */
	__u32 end_how;      /* enum gpuos_interval_end: how its end is known; not
			     * GPUOS_END_SWITCH_IN: its switch-in was not traced */
	__u32 pad;
};

/* Per-thread state kept between switch-out and switch-in. */
struct gpuos_sched_state {
	__u64 switched_out_ns;
	__u64 woken_ns;
	__s64 prev_state;
	__s32 syscall_nr;
	__u32 cause;
	__u32 woken_by_tid;
	__u32 pid;
	__u32 waker_pid;
	__u32 waker_flags;  /* 0 until sched_waking saw the wakeup */
	__u32 pad;
	/* The thread's run time (se.sum_exec_runtime) at switch-out: at an
	 * untraced switch-in's next switch-out, the run time since says when
	 * it came back. */
	__u64 run_ns_at_switch_out;
};

#endif
