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
#include "offcpu.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct gpuos_syscall_key);
	__type(value, struct gpuos_syscall_stats);
} syscall_stats SEC(".maps");

/* Indexes of the free slots; the agent fills it before attaching. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, GPUOS_DEFAULT_SYSCALL_SLOTS);
	__type(value, __u32);
} free_syscall_slots SEC(".maps");

/* A free slot for the current (traced) thread, noted in *ref; NULL, and
 * GPUOS_TID_NO_SLOT noted, when none is free: the thread then keeps its
 * state in thread_state and its totals in syscall_stats for good. */
static __always_inline struct gpuos_syscall_slot *take_slot(__u16 *ref, __u64 id)
{
	__u32 index;
	struct gpuos_syscall_slot *s;

	if (bpf_map_pop_elem(&free_syscall_slots, &index) ||
	    !(s = bpf_map_lookup_elem(&syscall_slots, &index))) {
		*ref = GPUOS_TID_NO_SLOT;
		return NULL;
	}
	s->tid = (__u32)id;
	s->pid = id >> 32;
	s->call_start_ns = 0;
	s->off_cpu_open = 0;
	/* Nothing of a previous owner's should be left (a syscall's exit
	 * tracepoint runs even for a thread killed inside it, so its call
	 * ends there): cleared anyway, as a record made from another thread's
	 * call would be wrong silently. */
	s->mm.start_ns = 0;
	s->futex.start_ns = 0;
	s->mm_batch.count = 0;
	/* Odd: owned.  A fully ordered atomic, so a reader that sees the new
	 * value also sees the owner above. */
	__sync_fetch_and_add(&s->seq, 1);
	*ref = index + 1;
	return s;
}

/* The entry of syscall nr (or of its wake calls) in a slot, or
 * GPUOS_SLOT_ENTRIES when nr has none and the call goes to syscall_stats. */
static __always_inline __u32 slot_entry(__s32 nr, int wake)
{
	if (wake)
		return nr == nr_futex ? GPUOS_SLOT_WAKE_FUTEX : GPUOS_SLOT_WAKE_FUTEX_WAKE;
	return (__u32)nr < GPUOS_SLOT_NRS ? (__u32)nr : GPUOS_SLOT_ENTRIES;
}

/* Syscalls recorded call by call too (mm.bpf.h, futex.bpf.h); their
 * arguments wait in the thread's slot, or its thread_state without one. */
static __always_inline int has_call_record(__s32 nr)
{
	return nr == nr_mmap || nr == nr_munmap || nr == nr_futex || nr == nr_futex_waitv ||
	       nr == nr_futex_wait || nr == nr_futex_wake;
}

static __always_inline void call_record_enter(struct gpuos_mm_call *mm,
					      struct gpuos_futex_call *futex, struct pt_regs *regs,
					      __s32 nr, __u64 now)
{
	if (nr == nr_mmap)
		mm_enter(mm, regs, now, 0);
	else if (nr == nr_munmap)
		mm_enter(mm, regs, now, 1);
	else if (nr == nr_futex)
		futex_enter(futex, PT_REGS_PARM2_SYSCALL(regs) & FUTEX_CMD_MASK,
			    PT_REGS_PARM1_SYSCALL(regs), PT_REGS_PARM4_SYSCALL(regs), now);
	else if (nr == nr_futex_waitv)
		futex_enter(futex, GPUOS_FUTEX_WAITV, PT_REGS_PARM1_SYSCALL(regs),
			    PT_REGS_PARM4_SYSCALL(regs), now);
	else if (nr == nr_futex_wait)
		futex_enter(futex, GPUOS_FUTEX2_WAIT, PT_REGS_PARM1_SYSCALL(regs),
			    PT_REGS_PARM5_SYSCALL(regs), now);
	else if (nr == nr_futex_wake)
		futex_enter(futex, GPUOS_FUTEX2_WAKE, PT_REGS_PARM1_SYSCALL(regs), 0, now);
}

/* A traced thread with a slot costs, per syscall, a helper call for its
 * id, two inlined array lookups and a clock read on each side, and keeps
 * the arguments of the calls recorded one by one in the slot too; the
 * task storage lookup (about 40 ns on the development VM) is left to
 * threads without a slot and to a traced thread's first syscall. */
SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	/* All an untraced thread pays: one bit of a small array, where its
	 * entry of the 8 MiB tid_slots array would be a cache miss. */
	if (!is_tracked(pid_tgid >> 32))
		return 0;
	__u32 tid = (__u32)pid_tgid;
	__u16 *ref = tid_slot_ref(tid);
	struct gpuos_syscall_slot *s = owned_slot(ref, tid);
	struct gpuos_thread_state *t = NULL;
	__s32 nr = (__s32)id;

	if (!s) {
		/* Without a slot so far or for good. */
		t = current_thread_of(pid_tgid >> 32);
		if (!t)
			return 0;
		if (ref && !*ref)
			s = take_slot(ref, pid_tgid);
	}
	__u64 now = bpf_ktime_get_ns();
	/* t, where this call looked it up, holds the state itself. */
	close_unseen_switch_in(t ? NULL : s, t, pid_tgid, now);
	if (s) {
		s->call_start_ns = now;
		s->call_nr = nr;
	} else {
		t->syscall.start_ns = now;
		t->syscall.nr = nr;
	}
	if (nr < 0 || !has_call_record(nr))
		return 0;
	if (s)
		call_record_enter(&s->mm, &s->futex, regs, nr, now);
	else
		call_record_enter(&t->mm, &t->futex, regs, nr, now);
	return 0;
}

/* Ends the call sys_enter kept for a record of its own (mm.bpf.h,
 * futex.bpf.h), in slot s or, without one, in thread state t.  Returns 1
 * for a futex wake call, with the threads it woke in *woken. */
static __always_inline int call_record_leave(struct gpuos_syscall_slot *s,
					     struct gpuos_thread_state *t, long ret, __u64 now,
					     __u64 id, __u64 *woken)
{
	struct gpuos_mm_call *mm = s ? &s->mm : &t->mm;
	struct gpuos_futex_call *futex = s ? &s->futex : &t->futex;

	if (mm->start_ns) {
		if (s)
			mm_leave_batched(s, ret, now);
		else
			mm_leave(mm, ret, now, id);
	}
	if (futex->start_ns && futex_leave(futex, ret, now, id)) {
		*woken = ret > 0 ? ret : 0;
		return 1;
	}
	return 0;
}

/* Adds one finished call to the thread's totals: its slot's entry for nr
 * when it has one, else syscall_stats. */
static __always_inline void add_call(struct gpuos_syscall_slot *s, __u64 id, __s32 nr, int wake,
				     __u64 duration, __u64 woken)
{
	__u32 entry = slot_entry(nr, wake);

	if (s) {
		/* Keeps clang from folding the bound check into the one in
		 * slot_entry, which leaves the verifier without the bound. */
		barrier_var(entry);
		if (entry < GPUOS_SLOT_ENTRIES) {
			struct gpuos_slot_entry *e = &s->entries[entry];
			e->calls++;
			e->total_ns += duration;
			if (duration > e->max_ns)
				e->max_ns = duration;
			if (entry == GPUOS_SLOT_WAKE_FUTEX)
				s->woken[0] += woken;
			else if (entry == GPUOS_SLOT_WAKE_FUTEX_WAKE)
				s->woken[1] += woken;
			return;
		}
	}
	struct gpuos_syscall_key key = { .tid = (__u32)id, .nr = wake ? GPUOS_WAKE_STATS_NR(nr) : nr };
	struct gpuos_syscall_stats *stats = bpf_map_lookup_elem(&syscall_stats, &key);
	if (stats) {
		stats->calls++;
		stats->total_ns += duration;
		stats->woken += woken;
		if (duration > stats->max_ns)
			stats->max_ns = duration;
		return;
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
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	/* No create here: a thread that entered the syscall traced has its
	 * start time set, in its slot or its state.  (Its process stays
	 * traced until its last thread exits, and exit_group never returns.) */
	__u64 id = bpf_get_current_pid_tgid();
	if (!is_tracked(id >> 32))
		return 0;
	__u32 tid = (__u32)id;
	struct gpuos_syscall_slot *s = owned_slot(tid_slot_ref(tid), tid);
	struct gpuos_thread_state *t = NULL;
	__u64 start_ns;
	__s32 nr;

	if (s) {
		start_ns = s->call_start_ns;
		if (!start_ns)
			return 0;
		nr = s->call_nr;
		/* Mark the thread as outside any syscall. */
		s->call_start_ns = 0;
	} else {
		t = bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(), 0, 0);
		if (!t || !t->syscall.start_ns)
			return 0;
		start_ns = t->syscall.start_ns;
		nr = t->syscall.nr;
		t->syscall.start_ns = 0;
	}
	__u64 now = bpf_ktime_get_ns();
	__u64 woken = 0;
	int wake = 0;
	close_unseen_switch_in(s, t, id, now);
	/* Where sys_enter kept the call: t is set whenever s is not. */
	if (nr >= 0 && has_call_record(nr))
		wake = call_record_leave(s, t, ret, now, id, &woken);
	add_call(s, id, nr, wake, now - start_ns, woken);
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
		woken = i == GPUOS_SLOT_WAKE_FUTEX ? s->woken[0] : s->woken[1];
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

/* Moves thread tid's totals from its slot into syscall_stats and frees the
 * slot.  The agent reads a slot only while its seq is odd, and
 * syscall_stats before the slots, so a thread's totals are never counted
 * twice (record/sources/syscalls_source.cc, ReadTables).  Returns the
 * start of the syscall the thread was inside (0: none), and its number in
 * *nr. */
static __always_inline __u64 give_back_slot(__u32 tid, __s32 *nr)
{
	__u16 *ref = tid_slot_ref(tid);
	struct gpuos_syscall_slot *s = owned_slot(ref, tid);

	if (!ref || !*ref)
		return 0;
	struct slot_harvest h = { .index = *ref - 1, .tid = tid };
	*ref = 0;
	if (!s)
		return 0;
	mm_batch_flush(s);
	__u64 in_flight = s->call_start_ns;
	*nr = s->call_nr;
	h.pid = s->pid;
	__sync_fetch_and_add(&s->seq, 1);  /* even: no owner */
	bpf_loop(GPUOS_SLOT_ENTRIES, harvest_entry, &h, 0);
	s->tid = 0;
	s->pid = 0;
	s->call_start_ns = 0;
	s->woken[0] = 0;
	s->woken[1] = 0;
	s->off_cpu_open = 0;
	bpf_map_push_elem(&free_syscall_slots, &h.index, 0);
	return in_flight;
}

/* Attached before the process programs (attach_first in
 * record/sources/syscalls_source.cc): the totals are in
 * syscall_stats before the agent learns of the exit. */
SEC("tracepoint/sched/sched_process_exit")
int give_back_slot_at_exit(void *ctx)
{
	__s32 nr;

	give_back_slot((__u32)bpf_get_current_pid_tgid(), &nr);
	return 0;
}

/* A thread other than the leader that execs takes the leader's id: its
 * slot, kept under the old id, goes back, and the execve in flight moves to
 * its thread_state so that its return is counted under the new id. */
SEC("tracepoint/sched/sched_process_exec")
int give_back_slot_at_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	__u32 old_tid = ctx->old_pid;
	__s32 nr = -1;

	if (old_tid == (__u32)ctx->pid)
		return 0;
	__u64 in_flight = give_back_slot(old_tid, &nr);
	struct gpuos_thread_state *t = current_thread();
	if (in_flight && t) {
		t->syscall.start_ns = in_flight;
		t->syscall.nr = nr;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
