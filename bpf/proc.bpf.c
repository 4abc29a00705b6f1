// SPDX-License-Identifier: GPL-2.0
/* Process and thread life of the traced tree.  New processes are added to
 * traced_tgids in task_newtask, which runs in the parent before the child
 * is first scheduled, so a DataLoader worker is followed from its first
 * instruction.  Processes leave the set when their last thread exits. */
#include "common.bpf.h"
#include "proc.h"

#define CLONE_THREAD 0x00010000
#define CLONE_PARENT 0x00008000

/* sched_process_exit gained group_dead in Linux 6.16; older kernels need
 * signal->live. */
struct trace_event_raw_sched_process_exit___group_dead {
	bool group_dead;
} __attribute__((preserve_access_index));

static __always_inline void emit_proc(__u32 kind, __u32 pid, __u32 tid, __u32 parent_pid,
				      __u32 parent_tid, __u64 clone_flags, __s32 exit_code,
				      const char *comm_src, int comm_is_kernel)
{
	struct gpuos_proc_event *e = reserve_event(sizeof(*e), kind, bpf_ktime_get_ns(), pid, tid);

	if (!e)
		return;
	e->clone_flags = clone_flags;
	e->parent_pid = parent_pid;
	e->parent_tid = parent_tid;
	e->exit_code = exit_code;
	e->pad = 0;
	if (comm_is_kernel)
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm_src);
	else
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->old_comm[0] = 0;
	submit_event(e);
}

SEC("tracepoint/task/task_newtask")
int handle_task_newtask(struct trace_event_raw_task_newtask *ctx)
{
	__u32 parent_tid;
	__u32 parent_pid = current_tracked_pid(&parent_tid);
	__u32 child = ctx->pid;
	__u64 flags = ctx->clone_flags;

	if (!parent_pid)
		return 0;
	if (flags & CLONE_THREAD) {
		emit_proc(GPUOS_EV_THREAD_START, parent_pid, child, parent_pid, parent_tid, flags, 0,
			  ctx->comm, 1);
		return 0;
	}
	if (set_tracked(child, 1))
		count_map_full(GPUOS_MAP_TRACKED);
	__u32 ppid = parent_pid;
	if (flags & CLONE_PARENT) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		ppid = BPF_CORE_READ(task, real_parent, tgid);
	}
	emit_proc(GPUOS_EV_PROCESS_START, child, child, ppid, parent_tid, flags, 0, ctx->comm, 1);
	return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int handle_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	__u32 tid;
	__u32 pid = current_tracked_pid(&tid);

	if (!pid)
		return 0;
	struct gpuos_exec_event *e = reserve_event(sizeof(*e), GPUOS_EV_EXEC, bpf_ktime_get_ns(), pid, tid);
	if (!e)
		return 0;
	e->old_tid = ctx->old_pid;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	unsigned int offset = ctx->__data_loc_filename & 0xFFFF;
	long n = bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), (void *)ctx + offset);
	e->filename_len = n > 0 ? n - 1 : 0;
	submit_event(e);
	return 0;
}

SEC("tracepoint/task/task_rename")
int handle_task_rename(struct trace_event_raw_task_rename *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	__u32 renamed = ctx->pid;

	/* A thread may be renamed by another thread of its process (through
	 * /proc/self/task/N/comm) or, rarely, by another process. */
	if (!is_tracked(pid)) {
		if (!is_tracked(renamed))
			return 0;
		pid = renamed;
	}
	struct gpuos_proc_event *e = reserve_event(sizeof(*e), GPUOS_EV_COMM_CHANGE, bpf_ktime_get_ns(),
					     renamed == (__u32)id ? pid : 0, renamed);
	if (!e)
		return 0;
	/* pid 0 above: the agent resolves the renamed thread's process. */
	e->clone_flags = 0;
	e->parent_pid = pid;
	e->parent_tid = (__u32)id;
	e->exit_code = 0;
	e->pad = 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), ctx->newcomm);
	bpf_probe_read_kernel_str(e->old_comm, sizeof(e->old_comm), ctx->oldcomm);
	submit_event(e);
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int handle_exit(struct trace_event_raw_sched_process_template *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	/* Found even when a sibling that ended the process cleared its bit
	 * first (common.bpf.h). */
	struct gpuos_thread_state *t = current_thread_or_exiting();

	if (!t && !is_tracked(pid))
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__s32 exit_code = BPF_CORE_READ(task, exit_code);
	bool group_dead;
	struct trace_event_raw_sched_process_exit___group_dead *with_flag = (void *)ctx;
	if (bpf_core_field_exists(with_flag->group_dead))
		group_dead = BPF_CORE_READ(with_flag, group_dead);
	else
		group_dead = BPF_CORE_READ(task, signal, live.counter) == 0;

	/* A traced thread whose state could not be made is not reported, but
	 * its process's bit is still cleared, so that a later process with the
	 * same id is not traced. */
	if (t)
		emit_proc(GPUOS_EV_THREAD_EXIT, pid, tid, 0, 0, 0, exit_code, 0, 0);
	if (group_dead) {
		if (t)
			emit_proc(GPUOS_EV_PROCESS_EXIT, pid, tid, 0, 0, 0, exit_code, 0, 0);
		set_tracked(pid, 0);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
