/* Every syscall of traced threads: count, total and max latency per
 * (thread, syscall), aggregated in the kernel. */
#ifndef GPUOS_BPF_SYSCALLS_H
#define GPUOS_BPF_SYSCALLS_H
#include "event_header.h"
#include "mm.h"
#include "futex.h"

struct gpuos_syscall_key {
	__u32 tid;
	__s32 nr;
};

struct gpuos_syscall_stats {
	__u64 calls;
	__u64 total_ns;
	__u64 max_ns;
	__u64 woken;  /* futex wakes only: threads woken, summed */
	__u32 pid;
	__u32 pad;
};

/* The key's nr for the futex *wake* calls of syscall NR (futex or
 * futex_wake): kept apart from the other calls of the same syscall so that
 * wakes are counted in the one hash update every syscall makes anyway,
 * rather than in a second map (docs/archive/benchmarks.md).  The agent adds them
 * back into NR's totals.  Real syscall numbers are >= 0. */
#define GPUOS_WAKE_STATS_NR(nr) (-2 - (nr))
#define GPUOS_IS_WAKE_STATS_NR(key_nr) ((key_nr) <= -2)
#define GPUOS_SYSCALL_OF_WAKE_STATS_NR(key_nr) (-2 - (key_nr))

/* Per-thread totals in a slot of an array, for syscall numbers below
 * GPUOS_SLOT_NRS: the hot path then indexes an array (a lookup the verifier
 * inlines) instead of hashing (tid, nr), about 50 ns less per syscall on
 * the development VM (docs/archive/benchmarks.md).  A traced thread takes a free
 * slot at its first syscall and gives it back when it exits, after copying
 * its totals into syscall_stats; a thread that finds no free slot, and
 * syscall numbers out of range, use syscall_stats directly. */
#define GPUOS_SLOT_NRS 512
/* Entries past the syscall numbers: the wake calls of futex and of
 * futex_wake (GPUOS_WAKE_STATS_NR's counterpart). */
#define GPUOS_SLOT_WAKE_FUTEX GPUOS_SLOT_NRS
#define GPUOS_SLOT_WAKE_FUTEX_WAKE (GPUOS_SLOT_NRS + 1)
#define GPUOS_SLOT_ENTRIES (GPUOS_SLOT_NRS + 2)
#define GPUOS_DEFAULT_SYSCALL_SLOTS 1024

struct gpuos_slot_entry {
	__u64 calls;
	__u64 total_ns;
	__u64 max_ns;
};

struct gpuos_syscall_slot {
	/* Odd while the slot belongs to a thread: bumped (atomically) when a
	 * thread takes it and when it gives it back, so a reader that sees the
	 * same odd value before and after its copy read one thread's totals. */
	__u64 seq;
	__u32 tid;
	__u32 pid;
	/* The syscall the thread is inside now (start 0: none). */
	__u64 call_start_ns;
	__s32 call_nr;
	/* 1 while the thread's off-CPU interval is open (offcpu.bpf.h): a
	 * syscall it makes then shows a switch-in the kernel did not trace. */
	__u32 off_cpu_open;
	__u64 woken[2];  /* threads woken: [0] futex, [1] futex_wake */
	/* The mmap/munmap or futex call in flight, for the records made call
	 * by call (mm.bpf.h, futex.bpf.h): kept here rather than in the
	 * thread's task storage, so that these calls, like every other, cost
	 * no task-storage lookup (docs/archive/benchmarks.md: "call records
	 * in the slot"). */
	struct gpuos_mm_call mm;
	struct gpuos_futex_call futex;
	/* The thread's finished mmap/munmap calls not sent yet (mm.h). */
	struct gpuos_mm_calls_event mm_batch;
	struct gpuos_slot_entry entries[GPUOS_SLOT_ENTRIES];
};

/* Which slot each thread holds, by thread id, 32 threads to an entry of
 * the tid_slots array: 0 none (yet), else the slot's index plus one, or
 * GPUOS_TID_NO_SLOT for a traced thread that found none free.  Indexing by
 * tid needs no helper call (the verifier inlines array lookups), where the
 * thread's task storage costs a call and a cache walk on every syscall. */
#define GPUOS_TIDS_PER_ENTRY 32
/* PID_MAX_LIMIT on 64-bit: no thread or process id reaches it.  Sizes
 * tid_slots and traced_tgids (common.bpf.h). */
#define GPUOS_PID_LIMIT 4194304
#define GPUOS_TID_NO_SLOT 0xffff
#define GPUOS_MAX_SYSCALL_SLOTS (GPUOS_TID_NO_SLOT - 1)
struct gpuos_tid_slots {
	__u16 slot[GPUOS_TIDS_PER_ENTRY];
};

/* The syscall a thread without a slot is inside now; the scheduler program
 * reads it (or the slot's) to name the cause of an off-CPU interval. */
struct gpuos_syscall_call {
	__u64 start_ns;
	__s32 nr;
	__u32 pad;
};

#endif
