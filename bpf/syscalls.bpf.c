// SPDX-License-Identifier: GPL-2.0
/* Every syscall of traced threads, aggregated in the kernel per (thread,
 * syscall): count, total and max latency.  Only sums are needed, so no
 * per-call record crosses the ring buffer (bcc's syscount/runqlat habit).
 * The same two programs also keep the mmap/munmap (mm.bpf.h) and futex
 * (futex.bpf.h) records, sharing one clock read per side.
 *
 * BTF raw tracepoints: these run for every syscall on the machine, and a
 * raw tracepoint program gets the syscall's registers directly (typed, so
 * the arguments are plain loads), where a perf-event one first has the
 * arguments copied into a trace record, and is skipped whenever another
 * BPF program runs on the CPU. */
#include "common.bpf.h"
#include "mm.bpf.h"
#include "futex.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct gpuos_syscall_key);
	__type(value, struct gpuos_syscall_stats);
} syscall_stats SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter, struct pt_regs *regs, long id)
{
	struct gpuos_thread_state *t = current_thread();

	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__s32 nr = (__s32)id;
	t->syscall.start_ns = now;
	t->syscall.nr = nr;
	if (nr < 0)
		return 0;
	if (nr == nr_mmap)
		mm_enter(t, regs, now, 0);
	else if (nr == nr_munmap)
		mm_enter(t, regs, now, 1);
	else if (nr == nr_futex)
		futex_enter(t, PT_REGS_PARM2_SYSCALL(regs) & FUTEX_CMD_MASK, PT_REGS_PARM1_SYSCALL(regs),
			    PT_REGS_PARM4_SYSCALL(regs), now);
	else if (nr == nr_futex_waitv)
		futex_enter(t, GPUOS_FUTEX_WAITV, PT_REGS_PARM1_SYSCALL(regs), PT_REGS_PARM4_SYSCALL(regs),
			    now);
	else if (nr == nr_futex_wait)
		futex_enter(t, GPUOS_FUTEX2_WAIT, PT_REGS_PARM1_SYSCALL(regs), PT_REGS_PARM5_SYSCALL(regs),
			    now);
	else if (nr == nr_futex_wake)
		futex_enter(t, GPUOS_FUTEX2_WAKE, PT_REGS_PARM1_SYSCALL(regs), 0, now);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	/* No create and no tracked_pids check here: a thread that entered the
	 * syscall traced has its start time set. */
	struct gpuos_thread_state *t = bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(), 0, 0);

	if (!t || !t->syscall.start_ns)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 duration = now - t->syscall.start_ns;
	__u64 id = bpf_get_current_pid_tgid();
	struct gpuos_syscall_key key = { .tid = (__u32)id, .nr = t->syscall.nr };
	__u64 woken = 0;
	/* Mark the thread as outside any syscall. */
	t->syscall.start_ns = 0;
	if (t->mm.start_ns)
		mm_leave(t, ret, now, id);
	if (t->futex.start_ns && futex_leave(t, ret, now, id)) {
		key.nr = GPUOS_WAKE_STATS_NR(key.nr);
		woken = ret > 0 ? ret : 0;
	}

	struct gpuos_syscall_stats *stats = bpf_map_lookup_elem(&syscall_stats, &key);
	if (stats) {
		stats->calls++;
		stats->total_ns += duration;
		stats->woken += woken;
		if (duration > stats->max_ns)
			stats->max_ns = duration;
		return 0;
	}
	struct gpuos_syscall_stats fresh = {
		.calls = 1,
		.total_ns = duration,
		.max_ns = duration,
		.woken = woken,
		.pid = id >> 32,
	};
	if (bpf_map_update_elem(&syscall_stats, &key, &fresh, BPF_NOEXIST))
		count_map_full(GPUOS_MAP_SYSCALL_STATS);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
