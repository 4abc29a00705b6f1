// SPDX-License-Identifier: GPL-2.0
/* mmap and munmap calls of traced threads: one record per call with its
 * entry time, duration, length and result.  Large pageable copies and
 * allocator churn show up here (a cudaMemcpy from pageable memory, a
 * DataLoader batch freed with munmap).  Raw sys_enter/sys_exit tracepoints,
 * like syscalls.bpf.c; every other syscall costs one number compare. */
#include "common.bpf.h"
#include "mm.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct gpuos_mm_call);
} mm_in_flight SEC(".maps");

SEC("raw_tp/sys_enter")
int handle_mm_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__s32 nr = (__s32)ctx->args[1];

	if (nr != nr_mmap && nr != nr_munmap)
		return 0;
	__u32 tid;
	__u32 pid = current_tracked_pid(&tid);
	if (!pid)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	struct gpuos_mm_call call = {
		.start_ns = bpf_ktime_get_ns(),
		.addr = PT_REGS_PARM1_CORE_SYSCALL(regs),
		.length = PT_REGS_PARM2_CORE_SYSCALL(regs),
		.is_munmap = nr == nr_munmap,
		.fd = -1,
	};
	if (!call.is_munmap) {
		call.prot = PT_REGS_PARM3_CORE_SYSCALL(regs);
		call.flags = PT_REGS_PARM4_CORE_SYSCALL(regs);
		call.fd = (__s32)PT_REGS_PARM5_CORE_SYSCALL(regs);
	}
	if (bpf_map_update_elem(&mm_in_flight, &tid, &call, BPF_ANY))
		count_map_full(GPUOS_MAP_MM_IN_FLIGHT);
	return 0;
}

SEC("raw_tp/sys_exit")
int handle_mm_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__s32 nr = exiting_syscall_nr(ctx);

	if (nr != nr_mmap && nr != nr_munmap)
		return 0;
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
		e->result = (long)ctx->args[1];
		e->prot = call->prot;
		e->flags = call->flags;
		e->fd = call->fd;
		e->pad = 0;
		submit_event(e);
	}
	bpf_map_delete_elem(&mm_in_flight, &tid);
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int handle_mm_process_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&mm_in_flight, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
