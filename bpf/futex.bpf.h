/* futex waits of traced threads (one record each: where a trainer thread
 * sleeps on a lock or a DataLoader queue) and futex wakes (counted per
 * thread in the kernel, in syscall_stats under GPUOS_WAKE_STATS_NR:
 * wake-heavy loops must stay cheap).  Called from
 * syscalls.bpf.c's sys_enter/sys_exit programs, so a futex call runs two
 * programs, not four (docs/archive/benchmarks.md: "two programs per
 * syscall"). */
#ifndef GPUOS_FUTEX_BPF_H
#define GPUOS_FUTEX_BPF_H

#include "common.bpf.h"
#include "futex.h"
#include "syscalls.h"

#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_REQUEUE 3
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP 5
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_CMP_REQUEUE_PI 12
#define FUTEX_LOCK_PI2 13
#define FUTEX_CMD_MASK 0x7f /* without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME */

static __always_inline int is_wait(__u32 op)
{
	return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI ||
	       op == FUTEX_LOCK_PI2 || op == FUTEX_WAIT_REQUEUE_PI || op == GPUOS_FUTEX_WAITV ||
	       op == GPUOS_FUTEX2_WAIT;
}

static __always_inline int is_wake(__u32 op)
{
	return op == FUTEX_WAKE || op == FUTEX_WAKE_BITSET || op == FUTEX_WAKE_OP ||
	       op == FUTEX_REQUEUE || op == FUTEX_CMP_REQUEUE || op == FUTEX_UNLOCK_PI ||
	       op == FUTEX_CMP_REQUEUE_PI || op == GPUOS_FUTEX2_WAKE;
}

/* call: the thread's in-flight record, in its syscall slot or, for a
 * thread without one, its thread_state. */
static __always_inline void futex_enter(struct gpuos_futex_call *call, __u32 op, __u64 uaddr,
					__u64 timeout, __u64 now)
{
	if (!is_wait(op) && !is_wake(op))
		return;
	call->start_ns = now;
	call->uaddr = uaddr;
	call->op = op;
	call->has_timeout = timeout != 0;
}

/* Records a wait; returns whether the call was a wake, which the caller
 * counts in syscall_stats. */
static __always_inline int futex_leave(struct gpuos_futex_call *call, long ret, __u64 now,
				       __u64 id)
{
	__u32 tid = (__u32)id;
	int wake = 0;

	if (is_wait(call->op)) {
		struct gpuos_futex_wait_event *e =
			reserve_event(sizeof(*e), GPUOS_EV_FUTEX_WAIT, call->start_ns, id >> 32, tid);
		if (e) {
			e->duration_ns = now - call->start_ns;
			e->uaddr = call->uaddr;
			e->result = ret;
			e->op = call->op;
			e->has_timeout = call->has_timeout;
			submit_event(e);
		}
	} else {
		wake = 1;
	}
	call->start_ns = 0;
	return wake;
}

#endif
