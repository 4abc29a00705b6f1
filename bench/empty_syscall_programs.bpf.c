// SPDX-License-Identifier: GPL-2.0
/* The floor under any tracer that counts syscalls on the raw syscall
 * tracepoints: one program on each that returns at once.  While they are
 * attached every thread of the machine takes the syscall slow path and
 * calls both; bench/compare_untraced.sh sets what an untraced process pays
 * for gpuos-trace against what it pays for these. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("tp_btf/sys_enter")
int BPF_PROG(floor_sys_enter, struct pt_regs *regs, long id)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_sys_exit, struct pt_regs *regs, long ret)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
