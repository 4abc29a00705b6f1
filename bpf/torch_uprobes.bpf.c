// SPDX-License-Identifier: GPL-2.0
/* Backward passes of a traced PyTorch process, from a uprobe and a uretprobe
 * on torch::autograd::Engine::execute (torch_uprobes.h).  The agent attaches
 * them to the library file, so every process that maps it hits them; the
 * traced-set test below keeps all others out at the cost of the test. */
#include "common.bpf.h"
#include "torch_uprobes.h"

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct gpuos_torch_in_flight);
} torch_in_flight SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(torch_backward_entry)
{
	__u32 tid;

	if (!current_tracked_pid(&tid))
		return 0;
	struct gpuos_torch_in_flight *st = bpf_task_storage_get(
		&torch_in_flight, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!st) {
		count_map_full(GPUOS_MAP_TORCH_IN_FLIGHT);
		return 0;
	}
	__u64 sp = PT_REGS_SP(ctx);

	/* The stack grows down: a call nested in the one in progress enters
	 * below its frame; one at or above it means that frame is gone. */
	if (st->depth > 0 && sp >= st->sp)
		st->depth = 0;
	if (st->depth++ > 0) {
		st->nested++;
		return 0;
	}
	st->sp = sp;
	st->nested = 0;
	st->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(torch_backward_return)
{
	__u64 now = bpf_ktime_get_ns();
	struct gpuos_torch_in_flight *st =
		bpf_task_storage_get(&torch_in_flight, bpf_get_current_task_btf(), 0, 0);

	/* No storage: the call began before tracking did, or the process is
	 * not traced. */
	if (!st || st->depth == 0)
		return 0;
	if (--st->depth > 0 || !st->start_ns)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	struct gpuos_torch_backward_event *e =
		reserve_event(sizeof(*e), GPUOS_EV_TORCH_BACKWARD, st->start_ns, id >> 32, (__u32)id);

	if (e) {
		e->duration_ns = now - st->start_ns;
		e->nested = st->nested;
		e->pad = 0;
		submit_event(e);
	}
	st->start_ns = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
