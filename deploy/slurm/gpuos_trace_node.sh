#!/bin/bash
# One node's tracer for gpuos_srun.sh: waits (up to GPUOS_ATTACH_WAIT_S,
# default 60 s) for tasks of another step of this job on this node, then
# records them with gpuos-trace --pid until they exit, to DIR/<node>.gpuos.
#   gpuos_trace_node.sh DIR
set -euo pipefail
dir=$1
node=$(hostname -s)
own_step=${SLURM_STEP_ID:-}
tracer=(${GPUOS_TRACE:-sudo -n gpuos-trace})
deadline=$((SECONDS + ${GPUOS_ATTACH_WAIT_S:-60}))
pids=()
while [[ ${#pids[@]} -eq 0 && $SECONDS -lt $deadline ]]; do
  # PID JOBID STEPID LOCALID GLOBALID; the tasks' own processes have a
  # LOCALID; the batch script, the extern step and this step are left out.
  mapfile -t pids < <(scontrol listpids "$SLURM_JOB_ID" 2>/dev/null |
    awk -v own="$own_step" 'NR > 1 && $3 != own && $3 != "batch" && $3 != "extern" && $4 != "-" {print $1}')
  [[ ${#pids[@]} -gt 0 ]] || sleep 0.2
done
[[ ${#pids[@]} -gt 0 ]] || { echo "gpuos_trace_node.sh: $node: no task of job $SLURM_JOB_ID appeared" >&2; exit 1; }
args=()
for p in "${pids[@]}"; do args+=(--pid "$p"); done
exec "${tracer[@]}" -q "${args[@]}" -o "$dir/$node.gpuos"
