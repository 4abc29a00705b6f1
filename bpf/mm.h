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
