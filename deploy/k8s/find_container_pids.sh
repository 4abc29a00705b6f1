#!/bin/bash
# Prints the host pids of the processes of one container, top-level ones
# only (gpuos-trace --pid follows their descendants itself), one a line:
#   find_container_pids CONTAINER_ID
# CONTAINER_ID as kubectl shows it (containerd://0123abcd..., cri-o://...,
# docker://...) or bare.  Matches the id in each process's cgroup path
# (/proc/PID/cgroup: .../cri-containerd-<id>.scope, .../crio-<id>.scope,
# .../docker/<id>, ...).  Run in the host's PID namespace (hostPID); reads
# PROC (default /proc).
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: find_container_pids CONTAINER_ID" >&2; exit 2; }
id=${1##*://}
[[ ${#id} -ge 12 ]] || { echo "find_container_pids: container id too short: $1" >&2; exit 2; }
proc=${PROC:-/proc}
declare -A in_container=()
for cg in "$proc"/[0-9]*/cgroup; do
  pid=${cg#"$proc"/}; pid=${pid%/cgroup}
  grep -q -- "$id" "$cg" 2>/dev/null && in_container[$pid]=1
done
[[ ${#in_container[@]} -gt 0 ]] || { echo "find_container_pids: no process of container $id on this node" >&2; exit 1; }
for pid in "${!in_container[@]}"; do
  ppid=$(awk '/^PPid:/{print $2}' "$proc/$pid/status" 2>/dev/null || echo 0)
  [[ -n ${in_container[$ppid]:-} ]] || echo "$pid"
done | sort -n
