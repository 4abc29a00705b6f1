// SPDX-License-Identifier: GPL-2.0
/* Every syscall of traced threads, aggregated in the kernel per (thread,
 * syscall): count, total and max latency.  Only sums are needed, so no
 * per-call record crosses the ring buffer (bcc's syscount/runqlat habit).
 *
 * Raw tracepoints: these run for every syscall on the machine, and a raw
 * tracepoint program gets the syscall's registers directly, where a
 * perf-event one first has the arguments copied into a trace record, and
 * is skipped whenever another BPF program runs on the CPU. */
#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct gpuos_syscall_key);
	__type(value, struct gpuos_syscall_stats);
} syscall_stats SEC(".maps");

SEC("raw_tp/sys_enter")
int handle_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tid;
	__u32 pid = current_tracked_pid(&tid);

	if (!pid)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct gpuos_syscall_call *call = bpf_map_lookup_elem(&syscall_in_flight, &tid);
	if (call) {
		call->start_ns = now;
		call->nr = (__s32)ctx->args[1];
		return 0;
	}
	struct gpuos_syscall_call fresh = { .start_ns = now, .nr = (__s32)ctx->args[1] };
	if (bpf_map_update_elem(&syscall_in_flight, &tid, &fresh, BPF_NOEXIST))
		count_map_full(GPUOS_MAP_SYSCALL_IN_FLIGHT);
	return 0;
}

SEC("raw_tp/sys_exit")
int handle_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct gpuos_syscall_call *call = bpf_map_lookup_elem(&syscall_in_flight, &tid);

	if (!call || !call->start_ns)
		return 0;
	__u64 duration = bpf_ktime_get_ns() - call->start_ns;
	struct gpuos_syscall_key key = { .tid = tid, .nr = call->nr };
	/* Mark the thread as outside any syscall; keep the slot for reuse. */
	call->start_ns = 0;

	struct gpuos_syscall_stats *stats = bpf_map_lookup_elem(&syscall_stats, &key);
	if (stats) {
		stats->calls++;
		stats->total_ns += duration;
		if (duration > stats->max_ns)
			stats->max_ns = duration;
		return 0;
	}
	struct gpuos_syscall_stats fresh = {
		.calls = 1,
		.total_ns = duration,
		.max_ns = duration,
		.pid = id >> 32,
	};
	if (bpf_map_update_elem(&syscall_stats, &key, &fresh, BPF_NOEXIST))
		count_map_full(GPUOS_MAP_SYSCALL_STATS);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
