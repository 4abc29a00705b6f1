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

/* Per-thread totals (bpf/syscalls.h); the agent reads them through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, GPUOS_DEFAULT_SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, struct gpuos_syscall_slot);
} syscall_slots SEC(".maps");

/* Indexes of the free slots; the agent fills it before attaching. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, GPUOS_DEFAULT_SYSCALL_SLOTS);
	__type(value, __u32);
} free_syscall_slots SEC(".maps");

/* The slot a traced thread takes at its first syscall exit; GPUOS_NO_SLOT
 * when none is free (it then uses syscall_stats for good). */
static __always_inline __u32 take_slot(struct gpuos_thread_state *t, __u64 id)
{
	__u32 index;
	struct gpuos_syscall_slot *s;

	if (bpf_map_pop_elem(&free_syscall_slots, &index) ||
	    !(s = bpf_map_lookup_elem(&syscall_slots, &index))) {
		t->syscall.slot = GPUOS_NO_SLOT;
		return GPUOS_NO_SLOT;
	}
	s->tid = (__u32)id;
	s->pid = id >> 32;
	/* Odd: owned.  A fully ordered atomic, so a reader that sees the new
	 * value also sees the owner above. */
	__sync_fetch_and_add(&s->seq, 1);
	t->syscall.slot = index + 1;
	return index + 1;
}

/* The entry of syscall nr (or of its wake calls) in a slot, or -1 when nr
 * has none and the call goes to syscall_stats. */
static __always_inline int slot_entry(__s32 nr, int wake)
{
	if (wake)
		return nr == nr_futex ? GPUOS_SLOT_WAKE_FUTEX : GPUOS_SLOT_WAKE_FUTEX_WAKE;
	return nr >= 0 && nr < GPUOS_SLOT_NRS ? nr : -1;
}

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
	int wake = 0;
	/* Mark the thread as outside any syscall. */
	t->syscall.start_ns = 0;
	if (t->mm.start_ns)
		mm_leave(t, ret, now, id);
	if (t->futex.start_ns && futex_leave(t, ret, now, id)) {
		key.nr = GPUOS_WAKE_STATS_NR(key.nr);
		woken = ret > 0 ? ret : 0;
		wake = 1;
	}

	__u32 slot = t->syscall.slot;
	if (!slot)
		slot = take_slot(t, id);
	int entry = slot_entry(t->syscall.nr, wake);
	if (slot != GPUOS_NO_SLOT && entry >= 0 && entry < GPUOS_SLOT_ENTRIES) {
		__u32 index = slot - 1;
		struct gpuos_syscall_slot *s = bpf_map_lookup_elem(&syscall_slots, &index);
		if (s) {
			struct gpuos_slot_entry *e = &s->entries[entry];
			e->calls++;
			e->total_ns += duration;
			if (duration > e->max_ns)
				e->max_ns = duration;
			if (entry >= GPUOS_SLOT_NRS)
				s->woken[entry - GPUOS_SLOT_NRS] += woken;
			return 0;
		}
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

struct slot_harvest {
	__u32 index;
	__u32 tid;
	__u32 pid;
};

/* bpf_loop body: adds entry i of a slot to syscall_stats and clears it. */
static long harvest_entry(__u64 i, struct slot_harvest *h)
{
	struct gpuos_syscall_slot *s = bpf_map_lookup_elem(&syscall_slots, &h->index);

	if (!s || i >= GPUOS_SLOT_ENTRIES)
		return 1;
	struct gpuos_slot_entry *e = &s->entries[i];
	if (!e->calls)
		return 0;
	struct gpuos_syscall_key key = { .tid = h->tid, .nr = (__s32)i };
	__u64 woken = 0;
	if (i >= GPUOS_SLOT_NRS) {
		key.nr = GPUOS_WAKE_STATS_NR(i == GPUOS_SLOT_WAKE_FUTEX ? nr_futex : nr_futex_wake);
		woken = s->woken[i - GPUOS_SLOT_NRS];
	}
	struct gpuos_syscall_stats *stats = bpf_map_lookup_elem(&syscall_stats, &key);
	if (stats) {
		stats->calls += e->calls;
		stats->total_ns += e->total_ns;
		stats->woken += woken;
		if (e->max_ns > stats->max_ns)
			stats->max_ns = e->max_ns;
	} else {
		struct gpuos_syscall_stats fresh = {
			.calls = e->calls,
			.total_ns = e->total_ns,
			.max_ns = e->max_ns,
			.woken = woken,
			.pid = h->pid,
		};
		if (bpf_map_update_elem(&syscall_stats, &key, &fresh, BPF_NOEXIST))
			count_map_full(GPUOS_MAP_SYSCALL_STATS);
	}
	e->calls = 0;
	e->total_ns = 0;
	e->max_ns = 0;
	return 0;
}

/* Moves the current thread's totals from its slot into syscall_stats and
 * frees the slot: at exit, and at exec (which may change the thread's id,
 * the slot's owner).  The agent reads a slot only while its seq is odd, and
 * syscall_stats before the slots, so a thread's totals are never counted
 * twice (bpf_session.cc, ReadSyscallTables). */
static __always_inline void give_back_slot(void)
{
	struct gpuos_thread_state *t = bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(), 0, 0);

	if (!t)
		return;
	__u32 slot = t->syscall.slot;
	t->syscall.slot = 0;
	if (!slot || slot == GPUOS_NO_SLOT)
		return;
	struct slot_harvest h = { .index = slot - 1 };
	struct gpuos_syscall_slot *s = bpf_map_lookup_elem(&syscall_slots, &h.index);
	if (!s)
		return;
	__sync_fetch_and_add(&s->seq, 1);  /* even: no owner */
	h.tid = s->tid;
	h.pid = s->pid;
	bpf_loop(GPUOS_SLOT_ENTRIES, harvest_entry, &h, 0);
	s->tid = 0;
	s->pid = 0;
	s->woken[0] = 0;
	s->woken[1] = 0;
	bpf_map_push_elem(&free_syscall_slots, &h.index, 0);
}

/* Attached before the process programs (bpf_session.cc): the totals are in
 * syscall_stats before the agent learns of the exit. */
SEC("tracepoint/sched/sched_process_exit")
int give_back_slot_at_exit(void *ctx)
{
	give_back_slot();
	return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int give_back_slot_at_exec(void *ctx)
{
	give_back_slot();
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
