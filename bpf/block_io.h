/* Block I/O requests of the traced tree, from issue to completion, each
 * attributed to the thread that submitted it.
 * Shared by block_io.bpf.c and the agent (record/sources/block_io_source.cc). */
#ifndef GPUOS_BPF_BLOCK_IO_H
#define GPUOS_BPF_BLOCK_IO_H
#include "event_header.h"

/* The request's flags that its rwbs string shows (as the kernel's
 * blk_fill_rwbs), in bits of our own: the kernel's REQ_* bit numbers
 * change between versions. */
enum gpuos_block_io_flags {
	GPUOS_BLOCK_PREFLUSH = 1,
	GPUOS_BLOCK_FUA = 2,
	GPUOS_BLOCK_RAHEAD = 4,
	GPUOS_BLOCK_SYNC = 8,
	GPUOS_BLOCK_META = 16,
};

/* One request: header.ts_ns is its issue to the device driver, pid/tid the
 * thread that submitted it (a request the kernel issues later, from a plug
 * flush or a worker, stays with its submitter).  Sent at its completion. */
struct gpuos_block_io_event {
	struct gpuos_event_header hdr;
	__u64 duration_ns;  /* issue to completion */
	__u64 queued_ns;    /* submission (block_io_start) to issue: in the block layer's queues */
	__u64 sector;
	__u32 bytes;
	__u32 dev;     /* the disk's dev_t as the tracepoints give it: major << 20 | minor */
	__u32 op;      /* REQ_OP_* (read 0, write 1, flush 2, discard 3...) */
	__u32 flags;   /* enum gpuos_block_io_flags */
	__u32 status;  /* blk_status_t at completion, 0 = success */
	__u32 pad;
};

/* A request in flight, by request address. */
struct gpuos_block_io_call {
	__u64 submit_ns; /* when taken: block_io_start, or the issue without it */
	__u64 issue_ns;  /* 0 until issued */
	__u64 sector;
	__u32 pid;
	__u32 tid;
	__u32 bytes;
	__u32 done_bytes;  /* completed so far (a request may complete in parts) */
	__u32 dev;
	__u32 op;
	__u32 flags;
	__u32 pad;
};

#endif
