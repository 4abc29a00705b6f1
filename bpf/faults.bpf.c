// SPDX-License-Identifier: GPL-2.0
/* User page faults of traced threads, counted in the kernel per thread and
 * sent as one record per window (fault_window_ns), per on-CPU stretch and
 * at thread exit: a fault costs one hash update, not a ring-buffer record,
 * yet every fault stays attributed to a short interval. */
#include "common.bpf.h"
#include "faults.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct gpuos_fault_state);
} fault_state SEC(".maps");

static __always_inline __u64 current_maj_flt(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	return BPF_CORE_READ(task, maj_flt);
}

/* Sends the window's count and starts a new, empty one. */
static __always_inline void flush(struct gpuos_fault_state *st, __u32 tid)
{
	__u64 maj = current_maj_flt();
	struct gpuos_page_fault_event *e =
		reserve_event(sizeof(*e), GPUOS_EV_PAGE_FAULTS, st->first_ns, st->pid, tid);

	if (e) {
		e->last_ns = st->last_ns;
		e->count = st->count;
		e->major = maj - st->maj_flt_at_start;
		submit_event(e);
	}
	st->count = 0;
	/* Carried over, not re-read at the next fault: a major fault still in
	 * progress at this flush is accounted to the next window. */
	st->maj_flt_at_start = maj;
}

SEC("tracepoint/exceptions/page_fault_user")
int handle_page_fault_user(void *ctx)
{
	__u32 tid;
	__u32 pid = current_tracked_pid(&tid);

	if (!pid)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct gpuos_fault_state *st = bpf_map_lookup_elem(&fault_state, &tid);
	if (!st) {
		struct gpuos_fault_state fresh = {
			.first_ns = now,
			.last_ns = now,
			.count = 1,
			.pid = pid,
			.maj_flt_at_start = current_maj_flt(),
		};
		if (bpf_map_update_elem(&fault_state, &tid, &fresh, BPF_NOEXIST))
			count_map_full(GPUOS_MAP_FAULT_STATE);
		return 0;
	}
	if (st->count && now - st->first_ns > fault_window_ns)
		flush(st, tid);
	if (!st->count)
		st->first_ns = now;
	st->count++;
	st->last_ns = now;
	return 0;
}

/* A raw tracepoint, like offcpu.bpf.c's, so it is never skipped. */
SEC("raw_tp/sched_switch")
int handle_fault_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	__u32 tid = BPF_CORE_READ(prev, pid);
	struct gpuos_fault_state *st = bpf_map_lookup_elem(&fault_state, &tid);

	if (st && st->count)
		flush(st, tid);
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int handle_fault_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct gpuos_fault_state *st = bpf_map_lookup_elem(&fault_state, &tid);

	if (!st)
		return 0;
	if (st->count)
		flush(st, tid);
	bpf_map_delete_elem(&fault_state, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
