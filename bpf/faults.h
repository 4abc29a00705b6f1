/* User page faults, counted per thread in short time windows. */
#ifndef GPUOS_BPF_FAULTS_H
#define GPUOS_BPF_FAULTS_H
#include "event_header.h"

/* `count` user page faults of one thread between header.ts_ns (the first)
 * and last_ns (the last).  Sent when the window (fault_window_ns) is over,
 * when the thread is switched out, and when it exits, so every fault is
 * attributed to an interval that holds no off-CPU time. major is the growth
 * of the kernel's per-task maj_flt counter over the same window. */
struct gpuos_page_fault_event {
	struct gpuos_event_header hdr;
	__u64 last_ns;
	__u32 count;
	__u32 major;
};

struct gpuos_fault_state {
	__u64 first_ns;
	__u64 last_ns;
	__u32 count;
	__u32 pid;
	__u64 maj_flt_at_start;
};

#endif
