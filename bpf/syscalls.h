/* Every syscall of traced threads: count, total and max latency per
 * (thread, syscall), aggregated in the kernel. */
#ifndef GPUOS_BPF_SYSCALLS_H
#define GPUOS_BPF_SYSCALLS_H
#include "event_header.h"

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
 * rather than in a second map (docs/benchmarks.md).  The agent adds them
 * back into NR's totals.  Real syscall numbers are >= 0. */
#define GPUOS_WAKE_STATS_NR(nr) (-2 - (nr))
#define GPUOS_IS_WAKE_STATS_NR(key_nr) ((key_nr) <= -2)
#define GPUOS_SYSCALL_OF_WAKE_STATS_NR(key_nr) (-2 - (key_nr))

/* The syscall a thread is inside now; the scheduler program reads it to name
 * the cause of an off-CPU interval. */
struct gpuos_syscall_call {
	__u64 start_ns;
	__s32 nr;
	__u32 pad;
};

#endif
