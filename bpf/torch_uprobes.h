/* PyTorch's autograd engine entry, seen by a uprobe and a uretprobe on
 * torch::autograd::Engine::execute in libtorch_cpu.so: every backward pass
 * (loss.backward() and torch.autograd.grad in Python, through
 * PythonEngine::execute, and tensor.backward() in C++) runs through it on
 * the thread that asked for it, so one record per outermost call marks a
 * backward pass of a job that has no annotations.  Shared by
 * torch_uprobes.bpf.c and the agent (record/torch_backward_probes.*). */
#ifndef GPUOS_BPF_TORCH_UPROBES_H
#define GPUOS_BPF_TORCH_UPROBES_H
#include "event_header.h"

/* One outermost backward pass: header.ts_ns is its entry, on the calling
 * thread.  nested: Engine::execute calls made from inside it (reentrant
 * backward, e.g. checkpointing), not recorded on their own. */
struct gpuos_torch_backward_event {
	struct gpuos_event_header hdr;
	__u64 duration_ns;
	__u32 nested;
	__u32 pad;
};

/* Per thread: the outermost call in progress.  sp is the stack pointer at
 * its entry: an entry found at or above it means that call was left by an
 * exception (its uretprobe never fires), so the count starts over. */
struct gpuos_torch_in_flight {
	__u64 start_ns;
	__u64 sp;
	__u32 depth;
	__u32 nested;
};

#endif
