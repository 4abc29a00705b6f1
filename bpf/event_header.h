/* Shared between the BPF programs and the agent: the header every ring-buffer
 * record starts with, and the kinds of record.  Plain C, fixed-size fields only,
 * so that the kernel side and the user side agree byte for byte. */
#ifndef GPUOS_BPF_EVENT_HEADER_H
#define GPUOS_BPF_EVENT_HEADER_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define GPUOS_COMM_LEN 16

enum gpuos_event_kind {
	GPUOS_EV_PROCESS_START = 1, /* proc.h: struct gpuos_proc_event */
	GPUOS_EV_THREAD_START = 2,  /* proc.h: struct gpuos_proc_event */
	GPUOS_EV_EXEC = 3,          /* proc.h: struct gpuos_exec_event */
	GPUOS_EV_COMM_CHANGE = 4,   /* proc.h: struct gpuos_proc_event */
	GPUOS_EV_THREAD_EXIT = 5,   /* proc.h: struct gpuos_proc_event */
	GPUOS_EV_PROCESS_EXIT = 6,  /* proc.h: struct gpuos_proc_event */
	GPUOS_EV_OFF_CPU = 7,       /* offcpu.h: struct gpuos_off_cpu_event */
	GPUOS_EV_PAGE_FAULTS = 8,   /* faults.h: struct gpuos_page_fault_event */
	GPUOS_EV_MMAP = 9,          /* mm.h: struct gpuos_mm_event */
	GPUOS_EV_MUNMAP = 10,       /* mm.h: struct gpuos_mm_event */
	GPUOS_EV_FUTEX_WAIT = 11,   /* futex.h: struct gpuos_futex_wait_event */
	GPUOS_EV_CUDA_CALL = 12,    /* cuda_uprobes.h: struct gpuos_cuda_call_event */
	GPUOS_EV_MM_CALLS = 13,     /* mm.h: struct gpuos_mm_calls_event (mmap and munmap calls) */
	GPUOS_EV_TORCH_BACKWARD = 14, /* torch_uprobes.h: struct gpuos_torch_backward_event */
	GPUOS_EV_BLOCK_IO = 15,     /* block_io.h: struct gpuos_block_io_event */
	GPUOS_EV_KIND_COUNT = 16,
};

/* ts_ns is bpf_ktime_get_ns(): CLOCK_MONOTONIC.  pid is the thread group id
 * (what user space calls the pid), tid the thread id. */
struct gpuos_event_header {
	__u64 ts_ns;
	__u32 pid;
	__u32 tid;
	__u32 kind;
	__u32 cpu;
};

/* Index into the per-CPU `drop_counts` array: why an event could not be
 * recorded.  The agent sums these over CPUs and reports them. */
enum gpuos_drop_reason {
	GPUOS_DROP_RINGBUF_FULL = 0,      /* + event kind: one slot per kind */
	GPUOS_DROP_MAP_FULL_BASE = GPUOS_EV_KIND_COUNT, /* + gpuos_map_id */
	GPUOS_DROP_SLOTS = GPUOS_EV_KIND_COUNT + 11, /* + GPUOS_MAP_COUNT */
};

/* Maps whose insertions can fail when full; counted per map. */
enum gpuos_map_id {
	GPUOS_MAP_TRACKED = 0,
	GPUOS_MAP_SYSCALL_IN_FLIGHT = 1,
	GPUOS_MAP_SYSCALL_STATS = 2,
	GPUOS_MAP_SCHED_STATE = 3,
	GPUOS_MAP_FAULT_STATE = 4,
	GPUOS_MAP_MM_IN_FLIGHT = 5,
	GPUOS_MAP_FUTEX_IN_FLIGHT = 6,
	GPUOS_MAP_FUTEX_WAKES = 7,
	GPUOS_MAP_CUDA_IN_FLIGHT = 8,
	GPUOS_MAP_TORCH_IN_FLIGHT = 9,
	GPUOS_MAP_BLOCK_IO_IN_FLIGHT = 10,
	GPUOS_MAP_COUNT = 11,
};

#endif
