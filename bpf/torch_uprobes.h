/* PyTorch's autograd engine entry, seen by a uprobe on
 * torch::autograd::Engine::execute in libtorch_cpu.so: every backward pass
 * (loss.backward() and torch.autograd.grad in Python, through
 * PythonEngine::execute, and tensor.backward() in C++) enters it on the
 * thread that asked for it, so one record per outermost entry marks the
 * start of a backward pass of a job that has no annotations.
 * Entry only, no uretprobe: a uretprobe replaces the return address on the
 * stack, and a C++ exception thrown through the probed function (an error
 * in backward, caught by the script) then finds no unwind information for
 * the trampoline and std::terminate()s the job.
 * Shared by torch_uprobes.bpf.c and the agent (record/torch_backward_probes.*). */
#ifndef GPUOS_BPF_TORCH_UPROBES_H
#define GPUOS_BPF_TORCH_UPROBES_H
#include "event_header.h"

/* The start of one outermost backward pass: header.ts_ns, on the calling
 * thread.  nested: entries inside a backward pass (reentrant backward, as
 * activation checkpointing makes) since the thread's previous record; they
 * are not recorded on their own. */
struct gpuos_torch_backward_event {
	struct gpuos_event_header hdr;
	__u32 nested;
	__u32 pad;
};

/* Per thread: the stack slot of the return address of the last outermost
 * entry, and that address.  A later entry below that slot, while the slot
 * still holds the address, is inside that call (its frame is alive). */
struct gpuos_torch_in_flight {
	__u64 ret_slot;
	__u64 ret_addr;
	__u32 nested;
	__u32 pad;
};

#endif
