#!/bin/bash
# Runs an srun job step with every rank on every node traced by gpuos-trace,
# one tracer per node writing one trace per node, then merges them:
#
#   gpuos_srun.sh [-o DIR] [SRUN OPTIONS] -- COMMAND [ARGS...]
#
# inside an allocation (sbatch script or salloc), e.g.
#   gpuos_srun.sh -o traces -N 2 --ntasks-per-node 4 -- python3 train.py
# -> traces/<node>.gpuos for each node and traces/job.gpuos (merged).
#
# The job step starts as srun starts it (ranks, binding, PMI untouched).
# Alongside it, one tracer task per node (srun --overlap) waits for the
# step's tasks on its node (scontrol listpids), attaches to them with
# `gpuos-trace --pid` and records until they exit, so what a rank did in the
# first moments before the attach (typically under a second) is not in the
# trace.  gpuos-trace needs root or CAP_BPF+CAP_PERFMON on the nodes: it
# runs as ${GPUOS_TRACE:-sudo -n gpuos-trace} (a sudoers rule for it, or set
# GPUOS_TRACE to a setcap'd binary).
set -euo pipefail
dir=gpuos-${SLURM_JOB_ID:-job}
srun_args=()
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    -o) dir=$2; shift 2 ;;
    *) srun_args+=("$1"); shift ;;
  esac
done
[[ ${1:-} == -- && $# -ge 2 ]] || { echo "usage: gpuos_srun.sh [-o DIR] [SRUN OPTIONS] -- COMMAND [ARGS...]" >&2; exit 2; }
shift
[[ -n ${SLURM_JOB_ID:-} ]] || { echo "gpuos_srun.sh: run it inside an allocation (sbatch or salloc)" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

# The job step, in the background; its step id is the next one.
srun "${srun_args[@]}" "$@" &
job_step=$!
# One tracer per node of the allocation; --overlap shares the CPUs with
# the job step instead of waiting for them.
nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
srun --overlap --ntasks-per-node=1 -N "$nodes" -n "$nodes" \
  "$here/gpuos_trace_node.sh" "$dir" &
tracers=$!
status=0
wait "$job_step" || status=$?
wait "$tracers" || echo "gpuos_srun.sh: a node's tracer failed (its trace may be missing)" >&2

shopt -s nullglob
files=()
for f in "$dir"/*.gpuos; do [[ $f == "$dir/job.gpuos" ]] || files+=("$f"); done
if [[ ${#files[@]} -ge 2 ]]; then
  ${GPUOS_TRACE_MERGE:-gpuos-trace} merge "${files[@]}" -o "$dir/job.gpuos"
elif [[ ${#files[@]} -eq 1 ]]; then
  echo "gpuos_srun.sh: one node: ${files[0]}" >&2
fi
exit "$status"
