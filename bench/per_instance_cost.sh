#!/usr/bin/env bash
# Does a traced syscall's cost vary from one gpuos-trace instance to the
# next, and is the difference inside our BPF programs or around them?
# For N instances in a row: the workload's on-CPU ns per getppid (or
# MODE) under a fresh gpuos-trace, and, read before that tracer exits, the
# mean run time of its handle_sys_enter and handle_sys_exit programs over
# a second, shorter loop under the same instance with
# kernel.bpf_stats_enabled on (those figures include bpf_stats' own clock
# reads, so compare them between instances, not with the workload's).
# An untraced run before each instance gives the baseline.  Needs root.
#   bench/per_instance_cost.sh [BUILD_DIR] [N] [MODE]
set -u
BUILD_DIR=${1:-build}
N=${2:-8}
MODE=${3:-getppid}
# PER_INSTANCE_TRACER: another gpuos-trace binary to measure (an older
# build, for a side-by-side comparison).
TRACER=$(realpath "${PER_INSTANCE_TRACER:-$BUILD_DIR/gpuos-trace}")
# Extra gpuos-trace options, e.g. PER_INSTANCE_TRACER_OPTS="--syscall-slots 0".
read -r -a TRACER_OPTS <<<"${PER_INSTANCE_TRACER_OPTS:-}"
WORKLOAD=$(realpath "$BUILD_DIR/bench/overhead_workload")
# PER_INSTANCE_PIN=CPU: run the untraced and the traced loops on that one CPU,
# so that a difference between CPUs is not read as the tracer's cost.
[[ -n ${PER_INSTANCE_PIN:-} ]] && WORKLOAD="taskset -c $PER_INSTANCE_PIN $WORKLOAD"
COUNT=$(realpath "$BUILD_DIR/bench/count_bpf_programs")
OUT=$(mktemp -d /tmp/gpuos-instances.XXXXXX)
trap 'sysctl -qw kernel.bpf_stats_enabled=0; rm -rf "$OUT"' EXIT
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
printf '%-9s %12s %12s %10s %10s %14s %14s %5s\n' instance "U cpu ns/op" "T cpu ns/op" "T-U" "wall T-U" "enter ns/run" "exit ns/run" cpu
for i in $(seq "$N"); do
  u=$($WORKLOAD "$MODE" --ops 300000 --warmup 30000)
  # --run-as-root: under sudo the traced shell must still read the BPF stats.
  t=$("$TRACER" "${TRACER_OPTS[@]}" -q --no-cuda --run-as-root -o "$OUT/t.gpuos" -- sh -c \
    "$WORKLOAD $MODE --ops 300000 --warmup 30000; sysctl -qw kernel.bpf_stats_enabled=1;
     $WORKLOAD $MODE --ops 100000 --warmup 0 >/dev/null; sysctl -qw kernel.bpf_stats_enabled=0;
     '$COUNT' --stats handle_sys_enter handle_sys_exit")
  line=$(grep '^mode=' <<<"$t")
  enter=$(grep 'prog=handle_sys_enter' <<<"$t" | tail -1)
  exit_=$(grep 'prog=handle_sys_exit' <<<"$t" | tail -1)
  uc=$(field "$u" cpu_ns_per_op) tc=$(field "$line" cpu_ns_per_op)
  uw=$(field "$u" ns_per_op) tw=$(field "$line" ns_per_op)
  printf '%-9s %12.1f %12.1f %10.1f %10.1f %14s %14s %5s\n' "$i" "$uc" "$tc" "$(awk -v a="$tc" -v b="$uc" 'BEGIN {print a - b}')" \
    "$(awk -v a="$tw" -v b="$uw" 'BEGIN {print a - b}')" \
    "$(field "$enter" ns_per_run)" "$(field "$exit_" ns_per_run)" "$(field "$line" cpu)"
done
