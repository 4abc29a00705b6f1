// SPDX-License-Identifier: GPL-2.0
/* mmap and munmap calls of traced threads: one record per call with its
 * entry time, duration, length and result.  Large pageable copies and
 * allocator churn show up here (a cudaMemcpy from pageable memory, a
 * DataLoader batch freed with munmap).  On mmap's and munmap's own
 * tracepoints, so that no other syscall runs these programs (on raw
 * sys_enter/sys_exit they cost every syscall of the machine ~100 ns more,
 * docs/benchmarks.md). */
#include "common.bpf.h"
#include "mm.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct gpuos_mm_call);
} mm_in_flight SEC(".maps");

static __always_inline int enter(struct syscall_trace_enter *ctx, __u32 is_munmap)
{
	__u32 tid;
	__u32 pid = current_tracked_pid(&tid);

	if (!pid)
		return 0;
	struct gpuos_mm_call call = {
		.start_ns = bpf_ktime_get_ns(),
		.addr = ctx->args[0],
		.length = ctx->args[1],
		.is_munmap = is_munmap,
	};
	if (!is_munmap) {
		call.prot = ctx->args[2];
		call.flags = ctx->args[3];
		call.fd = (__s32)ctx->args[4];
	} else {
		call.fd = -1;
	}
	if (bpf_map_update_elem(&mm_in_flight, &tid, &call, BPF_ANY))
		count_map_full(GPUOS_MAP_MM_IN_FLIGHT);
	return 0;
}

static __always_inline int leave(struct syscall_trace_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct gpuos_mm_call *call = bpf_map_lookup_elem(&mm_in_flight, &tid);

	if (!call)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 kind = call->is_munmap ? GPUOS_EV_MUNMAP : GPUOS_EV_MMAP;
	struct gpuos_mm_event *e = reserve_event(sizeof(*e), kind, call->start_ns, id >> 32, tid);
	if (e) {
		e->duration_ns = now - call->start_ns;
		e->addr = call->addr;
		e->length = call->length;
		e->result = ctx->ret;
		e->prot = call->prot;
		e->flags = call->flags;
		e->fd = call->fd;
		e->pad = 0;
		submit_event(e);
	}
	bpf_map_delete_elem(&mm_in_flight, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mmap")
int handle_enter_mmap(struct syscall_trace_enter *ctx)
{
	return enter(ctx, 0);
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int handle_exit_mmap(struct syscall_trace_exit *ctx)
{
	return leave(ctx);
}

SEC("tracepoint/syscalls/sys_enter_munmap")
int handle_enter_munmap(struct syscall_trace_enter *ctx)
{
	return enter(ctx, 1);
}

SEC("tracepoint/syscalls/sys_exit_munmap")
int handle_exit_munmap(struct syscall_trace_exit *ctx)
{
	return leave(ctx);
}

SEC("tracepoint/sched/sched_process_exit")
int handle_mm_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&mm_in_flight, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
