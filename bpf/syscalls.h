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
	__u32 pid;
	__u32 pad;
};

/* The syscall a thread is inside now; the scheduler program reads it to name
 * the cause of an off-CPU interval. */
struct gpuos_syscall_call {
	__u64 start_ns;
	__s32 nr;
	__u32 pad;
};

#endif
