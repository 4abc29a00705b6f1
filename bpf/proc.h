/* Process and thread life: new processes and threads, exec, renames, exits. */
#ifndef GPUOS_BPF_PROC_H
#define GPUOS_BPF_PROC_H
#include "event_header.h"

/* PROCESS_START, THREAD_START: header.pid/tid are the new task's; parent_pid
 * is the creating process (tgid), parent_tid the creating thread.
 * COMM_CHANGE: comm is the new name, old_comm the previous one.
 * THREAD_EXIT, PROCESS_EXIT: comm is the last name; exit_code is the
 * kernel's task->exit_code (a wait(2) status). PROCESS_EXIT is sent by the
 * last thread of the group to exit, after its THREAD_EXIT. */
struct gpuos_proc_event {
	struct gpuos_event_header hdr;
	__u64 clone_flags;
	__u32 parent_pid;
	__u32 parent_tid;
	__s32 exit_code;
	__u32 pad;
	char comm[GPUOS_COMM_LEN];
	char old_comm[GPUOS_COMM_LEN];
};

#define GPUOS_EXEC_FILENAME_LEN 256
struct gpuos_exec_event {
	struct gpuos_event_header hdr;
	__u32 old_tid; /* the thread that called execve (it becomes the leader) */
	__u32 filename_len;
	char comm[GPUOS_COMM_LEN];
	char filename[GPUOS_EXEC_FILENAME_LEN];
};

#endif
