// SPDX-License-Identifier: GPL-2.0
/* Starts of backward passes of a traced PyTorch process, from a uprobe on
 * torch::autograd::Engine::execute (torch_uprobes.h).  The agent attaches
 * it to the library file, so every process that maps it hits it; the
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
	__u64 now = bpf_ktime_get_ns();
	__u32 tid;
	__u32 pid = current_tracked_pid(&tid);

	if (!pid)
		return 0;
	struct gpuos_torch_in_flight *st = bpf_task_storage_get(
		&torch_in_flight, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!st) {
		count_map_full(GPUOS_MAP_TORCH_IN_FLIGHT);
		return 0;
	}
	/* At a function's first instruction the stack pointer points at the
	 * return address. */
	__u64 slot = PT_REGS_SP(ctx);
	__u64 ret = 0;

	bpf_probe_read_user(&ret, sizeof(ret), (void *)slot);
	if (st->ret_slot && slot < st->ret_slot) {
		/* Deeper than the last outermost entry: nested in it if its frame
		 * is alive, i.e. its return address is still in its slot (a
		 * returned call's slot is overwritten by the frames that reuse
		 * the stack there, and an entry at or above it is not nested). */
		__u64 outer = 0;

		if (!bpf_probe_read_user(&outer, sizeof(outer), (void *)st->ret_slot) &&
		    outer == st->ret_addr) {
			st->nested++;
			return 0;
		}
	}
	st->ret_slot = slot;
	st->ret_addr = ret;
	struct gpuos_torch_backward_event *e =
		reserve_event(sizeof(*e), GPUOS_EV_TORCH_BACKWARD, now, pid, tid);

	if (e) {
		e->nested = st->nested;
		e->pad = 0;
		submit_event(e);
	}
	st->nested = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
