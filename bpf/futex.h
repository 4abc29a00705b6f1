/* futex waits (one record each) and wakes (counted per thread). */
#ifndef GPUOS_BPF_FUTEX_H
#define GPUOS_BPF_FUTEX_H
#include "event_header.h"

/* header.ts_ns is the syscall entry; result is the return value (0, or
 * -ETIMEDOUT, -EAGAIN, -EINTR...).  op is the futex op without the
 * PRIVATE/CLOCK_REALTIME flags; futex_waitv calls have op = GPUOS_FUTEX_WAITV. */
#define GPUOS_FUTEX_WAITV 0x100
/* futex2's futex_wait()/futex_wake() syscalls (Linux 6.7). */
#define GPUOS_FUTEX2_WAIT 0x101
#define GPUOS_FUTEX2_WAKE 0x102
struct gpuos_futex_wait_event {
	struct gpuos_event_header hdr;
	__u64 duration_ns;
	__u64 uaddr;
	__s64 result;
	__u32 op;
	__u32 has_timeout;
};

struct gpuos_futex_call {
	__u64 start_ns;
	__u64 uaddr;
	__u32 op;
	__u32 has_timeout;
};

#endif
