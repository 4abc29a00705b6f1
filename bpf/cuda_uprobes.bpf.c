// SPDX-License-Identifier: GPL-2.0
/* CUDA driver API calls of a traced process, from uprobes on its libcuda:
 * the fallback when gpuos-trace attaches to a running process and cannot
 * put its CUPTI shim into it.  CPU side only (thread, entry time, duration,
 * CUresult, copy sizes, launch shapes); no GPU timing, no correlation ids.
 *
 * One entry program and one return program serve every probed function:
 * the agent attaches them once per function, with the function's id and
 * what to read from its arguments in the bpf cookie (cuda_uprobes.h). */
#include "common.bpf.h"
#include "cuda_uprobes.h"

/* Per-thread stack of calls in progress.  Task storage goes away with the
 * thread, so a thread that exits inside a call leaves nothing behind. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct gpuos_cuda_in_flight);
} cuda_in_flight SEC(".maps");

/* The 6th and 7th integer arguments (this libbpf's PT_REGS_PARM* stop at
 * the 5th): x86-64 passes the 6th in r9 and the 7th on the stack, just
 * above the return address the call pushed; arm64 passes both in x5, x6. */
static __always_inline __u64 arg6(struct pt_regs *ctx)
{
#if defined(__TARGET_ARCH_x86)
	return ctx->r9;
#elif defined(__TARGET_ARCH_arm64)
	return ((struct user_pt_regs *)ctx)->regs[5];
#else
#error "cuda_uprobes: unsupported architecture"
#endif
}

static __always_inline __u64 arg7(struct pt_regs *ctx)
{
#if defined(__TARGET_ARCH_x86)
	__u64 value = 0;

	bpf_probe_read_user(&value, sizeof(value), (void *)(PT_REGS_SP(ctx) + 8));
	return value;
#elif defined(__TARGET_ARCH_arm64)
	return ((struct user_pt_regs *)ctx)->regs[6];
#endif
}

static __always_inline __u64 read_user_u64(__u64 base, __u32 offset)
{
	__u64 value = 0;

	if (bpf_probe_read_user(&value, sizeof(value), (void *)(base + offset)))
		return 0;
	return value;
}

/* Fills the frame's bytes/grid/block from the arguments; a struct the
 * probe cannot read (not yet faulted in) leaves them 0. */
static __always_inline void read_args(struct pt_regs *ctx, __u32 args, struct gpuos_cuda_frame *f)
{
	__u64 p;

	switch (args) {
	case GPUOS_CUDA_ARGS_LAUNCH:
		f->grid[0] = PT_REGS_PARM2(ctx);
		f->grid[1] = PT_REGS_PARM3(ctx);
		f->grid[2] = PT_REGS_PARM4(ctx);
		f->block[0] = PT_REGS_PARM5(ctx);
		f->block[1] = arg6(ctx);
		f->block[2] = arg7(ctx);
		break;
	case GPUOS_CUDA_ARGS_LAUNCH_CONFIG:
		p = PT_REGS_PARM1(ctx);
		if (bpf_probe_read_user(f->grid, sizeof(f->grid),
					(void *)(p + GPUOS_CUDA_LAUNCH_CONFIG_GRID_OFFSET)))
			f->grid[0] = f->grid[1] = f->grid[2] = 0;
		if (bpf_probe_read_user(f->block, sizeof(f->block),
					(void *)(p + GPUOS_CUDA_LAUNCH_CONFIG_BLOCK_OFFSET)))
			f->block[0] = f->block[1] = f->block[2] = 0;
		break;
	case GPUOS_CUDA_ARGS_BYTES_ARG3:
		f->bytes = PT_REGS_PARM3(ctx);
		break;
	case GPUOS_CUDA_ARGS_COPY_2D:
		p = PT_REGS_PARM1(ctx);
		f->bytes = read_user_u64(p, GPUOS_CUDA_MEMCPY2D_WIDTH_OFFSET) *
			   read_user_u64(p, GPUOS_CUDA_MEMCPY2D_HEIGHT_OFFSET);
		break;
	case GPUOS_CUDA_ARGS_COPY_3D:
		p = PT_REGS_PARM1(ctx);
		f->bytes = read_user_u64(p, GPUOS_CUDA_MEMCPY3D_WIDTH_OFFSET) *
			   read_user_u64(p, GPUOS_CUDA_MEMCPY3D_HEIGHT_OFFSET) *
			   read_user_u64(p, GPUOS_CUDA_MEMCPY3D_DEPTH_OFFSET);
		break;
	case GPUOS_CUDA_ARGS_MEMSET_8:
		f->bytes = PT_REGS_PARM3(ctx);
		break;
	case GPUOS_CUDA_ARGS_MEMSET_16:
		f->bytes = PT_REGS_PARM3(ctx) * 2;
		break;
	case GPUOS_CUDA_ARGS_MEMSET_32:
		f->bytes = PT_REGS_PARM3(ctx) * 4;
		break;
	}
}

SEC("uprobe")
int BPF_KPROBE(cuda_call_entry)
{
	__u32 tid;

	if (!current_tracked_pid(&tid))
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct gpuos_cuda_in_flight *st = bpf_task_storage_get(
		&cuda_in_flight, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!st) {
		count_map_full(GPUOS_MAP_CUDA_IN_FLIGHT);
		return 0;
	}
	__u32 depth = st->depth;

	/* Counted even when too deep to keep, so that returns still pair up. */
	st->depth = depth + 1;
	if (depth >= GPUOS_CUDA_MAX_DEPTH)
		return 0;
	struct gpuos_cuda_frame *f = &st->frames[depth];

	f->function = GPUOS_CUDA_COOKIE_FUNCTION(cookie);
	f->bytes = 0;
	f->grid[0] = f->grid[1] = f->grid[2] = 0;
	f->block[0] = f->block[1] = f->block[2] = 0;
	read_args(ctx, GPUOS_CUDA_COOKIE_ARGS(cookie), f);
	/* Last, so that the time spent reading arguments is not the call's. */
	f->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(cuda_call_return, long ret)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	/* No storage: this thread's call began before tracking did, or the
	 * process is not traced at all. */
	struct gpuos_cuda_in_flight *st =
		bpf_task_storage_get(&cuda_in_flight, bpf_get_current_task_btf(), 0, 0);

	if (!st || st->depth == 0)
		return 0;
	__u32 depth = st->depth - 1;

	st->depth = depth;
	if (depth >= GPUOS_CUDA_MAX_DEPTH)
		return 0;
	struct gpuos_cuda_frame *f = &st->frames[depth];
	__u32 function = GPUOS_CUDA_COOKIE_FUNCTION(bpf_get_attach_cookie(ctx));

	/* A mismatch means an entry without its return (a call abandoned by
	 * longjmp); its frame is stale and this call's was never kept. */
	if (f->function != function || !f->start_ns)
		return 0;
	struct gpuos_cuda_call_event *e =
		reserve_event(sizeof(*e), GPUOS_EV_CUDA_CALL, f->start_ns, id >> 32, (__u32)id);

	if (e) {
		e->duration_ns = now - f->start_ns;
		e->bytes = f->bytes;
		e->result = (__s32)ret;
		e->function = function;
		e->grid[0] = f->grid[0];
		e->grid[1] = f->grid[1];
		e->grid[2] = f->grid[2];
		e->block[0] = f->block[0];
		e->block[1] = f->block[1];
		e->block[2] = f->block[2];
		submit_event(e);
	}
	f->start_ns = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
