// SPDX-License-Identifier: GPL-2.0
/* Block I/O requests of the traced tree (bpf/block_io.h).  A request is
 * taken into block_io_in_flight, keyed by its address, when it is made from
 * the submitter's bio (block_io_start, in the submitting thread), so that
 * a request issued later from a plug flush or a kworker stays with the
 * thread that submitted it; block_rq_issue stamps its issue and its final
 * size (bios merged meanwhile included); block_rq_complete sends it. */
#include "common.bpf.h"
#include "block_io.h"

#define GPUOS_BLOCK_IO_IN_FLIGHT 16384
#define GPUOS_REQ_OP_MASK 0xff

/* Set by the agent when this kernel lacks block_io_start (before 6.5): the
 * request then goes to the thread that issues it, when that one is traced. */
const volatile __u32 attribute_at_issue = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPUOS_BLOCK_IO_IN_FLIGHT);
	__type(key, __u64);
	__type(value, struct gpuos_block_io_call);
} block_io_in_flight SEC(".maps");

static __always_inline void take_request(struct request *rq)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (!is_tracked(id >> 32))
		return;
	__u64 key = (__u64)rq;
	struct gpuos_block_io_call call = { .submit_ns = bpf_ktime_get_ns(), .pid = id >> 32, .tid = (__u32)id };
	if (bpf_map_update_elem(&block_io_in_flight, &key, &call, BPF_ANY))
		count_map_full(GPUOS_MAP_BLOCK_IO_IN_FLIGHT);
}

/* The request's rwbs flags (enum gpuos_block_io_flags). */
static __always_inline __u32 request_flags(__u32 opf)
{
	__u32 flags = 0;

	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))
		flags |= GPUOS_BLOCK_PREFLUSH;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		flags |= GPUOS_BLOCK_FUA;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		flags |= GPUOS_BLOCK_RAHEAD;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)))
		flags |= GPUOS_BLOCK_SYNC;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		flags |= GPUOS_BLOCK_META;
	return flags;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(handle_block_io_start, struct request *rq)
{
	take_request(rq);
	return 0;
}

/* Also at a reissue after a requeue: the last issue counts. */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(handle_block_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct gpuos_block_io_call *call = bpf_map_lookup_elem(&block_io_in_flight, &key);

	if (!call && attribute_at_issue) {
		take_request(rq);
		call = bpf_map_lookup_elem(&block_io_in_flight, &key);
	}
	if (!call)
		return 0;
	__u32 opf = BPF_CORE_READ(rq, cmd_flags);
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	call->issue_ns = bpf_ktime_get_ns();
	call->sector = BPF_CORE_READ(rq, __sector);
	call->bytes = BPF_CORE_READ(rq, __data_len);
	call->done_bytes = 0;
	call->dev = disk ? ((__u32)BPF_CORE_READ(disk, major) << 20) |
				   (__u32)BPF_CORE_READ(disk, first_minor)
			 : 0;
	call->op = opf & GPUOS_REQ_OP_MASK;
	call->flags = request_flags(opf);
	return 0;
}

/* Called once per completed part; the request is done when all its bytes
 * are, or at an error. */
SEC("tp_btf/block_rq_complete")
int BPF_PROG(handle_block_rq_complete, struct request *rq, blk_status_t error,
	     unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct gpuos_block_io_call *call = bpf_map_lookup_elem(&block_io_in_flight, &key);

	if (!call || !call->issue_ns)
		return 0;
	call->done_bytes += nr_bytes;
	if (!error && call->done_bytes < call->bytes)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct gpuos_block_io_event *e = reserve_event(sizeof(*e), GPUOS_EV_BLOCK_IO,
						       call->issue_ns, call->pid, call->tid);
	if (e) {
		e->duration_ns = now - call->issue_ns;
		e->queued_ns = call->submit_ns < call->issue_ns ? call->issue_ns - call->submit_ns : 0;
		e->sector = call->sector;
		e->bytes = call->bytes;
		e->dev = call->dev;
		e->op = call->op;
		e->flags = call->flags;
		e->status = error;
		e->pad = 0;
		submit_event(e);
	}
	bpf_map_delete_elem(&block_io_in_flight, &key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
