/* mmap and munmap calls of traced threads: one record per call, or a
 * batch of calls per record. */
#ifndef GPUOS_BPF_MM_H
#define GPUOS_BPF_MM_H
#include "event_header.h"

/* One mmap or munmap call.  result is the syscall's return value (the
 * mapped address for mmap, 0 for munmap, -errno on failure); prot, flags
 * and fd are mmap's (0, 0, -1 for munmap). */
struct gpuos_mm_record {
	__u64 start_ns;
	__u64 duration_ns;
	__u64 addr;
	__u64 length;
	__s64 result;
	__u32 prot;
	__u32 flags;
	__s32 fd;
	__u32 is_munmap;
};

/* A call of a thread without a syscall slot: one record each, kind
 * GPUOS_EV_MMAP or GPUOS_EV_MUNMAP; header.ts_ns is call.start_ns. */
struct gpuos_mm_event {
	struct gpuos_event_header hdr;
	struct gpuos_mm_record call;
};

/* The mmap/munmap calls of a thread that holds a syscall slot go out in
 * batches: one ring-buffer record of up to GPUOS_MM_BATCH calls, kept in
 * the slot until it is full, its first call is older than
 * mm_batch_window_ns, the thread blocks (a voluntary switch), gives the
 * slot back (exit, exec), or the agent stops (it reads what is left in the
 * slots).  A record per call costs the mmap and munmap exits about 85 ns
 * each on the development VM (docs/archive/benchmarks.md: "mmap/munmap
 * batches"). */
#define GPUOS_MM_BATCH 8

/* header.ts_ns is the first call's start, header.tid the thread that made
 * them all; count calls follow (the record is cut after the last). */
struct gpuos_mm_calls_event {
	struct gpuos_event_header hdr;
	__u32 count;
	__u32 pad;
	struct gpuos_mm_record calls[GPUOS_MM_BATCH];
};

struct gpuos_mm_call {
	__u64 start_ns;
	__u64 addr;
	__u64 length;
	__u32 prot;
	__u32 flags;
	__s32 fd;
	__u32 is_munmap;
};

#endif
