// SPDX-License-Identifier: GPL-2.0
/* futex waits of traced threads (one record each: where a trainer thread
 * sleeps on a lock or a DataLoader queue) and futex wakes (counted per
 * thread in the kernel: wake-heavy loops must stay cheap).  On the futex
 * syscalls' own tracepoints, so no other syscall runs these programs. */
#include "common.bpf.h"
#include "futex.h"

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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct gpuos_futex_call);
} futex_in_flight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct gpuos_futex_wake_stats);
} futex_wakes SEC(".maps");

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

static __always_inline int enter(__u32 op, __u64 uaddr, __u64 timeout)
{
	__u32 tid;
	__u32 pid = current_tracked_pid(&tid);

	if (!pid)
		return 0;
	if (!is_wait(op) && !is_wake(op))
		return 0;
	struct gpuos_futex_call call = {
		.start_ns = bpf_ktime_get_ns(),
		.uaddr = uaddr,
		.op = op,
		.has_timeout = timeout != 0,
	};
	if (bpf_map_update_elem(&futex_in_flight, &tid, &call, BPF_ANY))
		count_map_full(GPUOS_MAP_FUTEX_IN_FLIGHT);
	return 0;
}

static __always_inline int leave(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct gpuos_futex_call *call = bpf_map_lookup_elem(&futex_in_flight, &tid);

	if (!call || !call->start_ns)
		return 0;
	if (is_wait(call->op)) {
		__u64 now = bpf_ktime_get_ns();
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
		struct gpuos_futex_wake_stats *stats = bpf_map_lookup_elem(&futex_wakes, &tid);
		if (!stats) {
			struct gpuos_futex_wake_stats fresh = { .pid = id >> 32 };
			if (bpf_map_update_elem(&futex_wakes, &tid, &fresh, BPF_NOEXIST)) {
				count_map_full(GPUOS_MAP_FUTEX_WAKES);
			}
			stats = bpf_map_lookup_elem(&futex_wakes, &tid);
		}
		if (stats) {
			stats->calls++;
			if (ret > 0)
				stats->woken += ret;
		}
	}
	/* Mark the slot free instead of deleting it: the next futex call of this
	 * thread reuses it without a hash insertion. */
	call->start_ns = 0;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex")
int handle_enter_futex(struct syscall_trace_enter *ctx)
{
	return enter(ctx->args[1] & FUTEX_CMD_MASK, ctx->args[0], ctx->args[3]);
}

SEC("tracepoint/syscalls/sys_exit_futex")
int handle_exit_futex(struct syscall_trace_exit *ctx)
{
	return leave(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int handle_enter_futex_waitv(struct syscall_trace_enter *ctx)
{
	return enter(GPUOS_FUTEX_WAITV, ctx->args[0], ctx->args[3]);
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int handle_exit_futex_waitv(struct syscall_trace_exit *ctx)
{
	return leave(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_futex_wait")
int handle_enter_futex2_wait(struct syscall_trace_enter *ctx)
{
	return enter(GPUOS_FUTEX2_WAIT, ctx->args[0], ctx->args[4]);
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int handle_exit_futex2_wait(struct syscall_trace_exit *ctx)
{
	return leave(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_futex_wake")
int handle_enter_futex2_wake(struct syscall_trace_enter *ctx)
{
	return enter(GPUOS_FUTEX2_WAKE, ctx->args[0], 0);
}

SEC("tracepoint/syscalls/sys_exit_futex_wake")
int handle_exit_futex2_wake(struct syscall_trace_exit *ctx)
{
	return leave(ctx->ret);
}

SEC("tracepoint/sched/sched_process_exit")
int handle_futex_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&futex_in_flight, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
