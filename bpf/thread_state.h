/* What the programs keep per traced thread (the thread_state task storage
 * of common.bpf.h); a header of its own so that user space (the recording
 * tests) reads the same layout. */
#ifndef GPUOS_BPF_THREAD_STATE_H
#define GPUOS_BPF_THREAD_STATE_H
#include "syscalls.h"
#include "offcpu.h"
#include "faults.h"
#include "mm.h"
#include "futex.h"

/* Everything the programs keep per thread, in the thread's own task
 * storage: a lookup is a pointer chase from the task, where a tid-keyed
 * hash costs a hash, a bucket walk and, for untraced threads, a miss in
 * every program (docs/archive/benchmarks.md: "per-thread state in task
 * storage").  Freed by the kernel
 * with the task, so no exit handler has to delete it.  A start time or
 * count of 0 marks a slot as empty. */
struct gpuos_thread_state {
	/* Made only for threads of the traced tree (current_thread), so its
	 * existence says the thread is traced. */
	__u32 pid;          /* its thread group id; 0 until the first event */
	__u32 pad;
	struct gpuos_syscall_call syscall;  /* syscalls.bpf.c; read by offcpu.bpf.c */
	struct gpuos_sched_state sched;     /* offcpu.bpf.c; switched_out_ns != 0: kept */
	struct gpuos_fault_state fault;     /* faults.bpf.c; count != 0: a window is open */
	/* The call in flight of a thread without a syscall slot (a thread
	 * with one keeps it there). */
	struct gpuos_mm_call mm;            /* mm.bpf.h; start_ns != 0: in flight */
	struct gpuos_futex_call futex;      /* futex.bpf.h; start_ns != 0: in flight */
};

#endif
