/* mmap and munmap calls of traced threads, one record per call. */
#ifndef GPUOS_BPF_MM_H
#define GPUOS_BPF_MM_H
#include "event_header.h"

/* header.ts_ns is the syscall entry. result is the syscall's return value
 * (the mapped address for mmap, 0 for munmap, -errno on failure). */
struct gpuos_mm_event {
	struct gpuos_event_header hdr;
	__u64 duration_ns;
	__u64 addr;
	__u64 length;
	__s64 result;
	__u32 prot;
	__u32 flags;
	__s32 fd;
	__u32 pad;
};

/* The mmap/munmap calls of a thread that holds a syscall slot go out in
 * batches: one ring-buffer record of up to GPUOS_MM_BATCH calls, kept in
 * the slot until it is full, its first call is older than
 * mm_batch_window_ns, the thread blocks (a voluntary switch), gives the
 * slot back (exit, exec), or the agent stops (it reads what is left in the
 * slots).  A record per call cost the mmap and munmap exits about 85 ns
 * each on the development VM (docs/benchmarks.md, session 7). */
#define GPUOS_MM_BATCH 8

/* One call of a batch: gpuos_mm_event's fields without its header. */
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
