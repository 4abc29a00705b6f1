#!/bin/bash
# Traces the processes of Kubernetes pods with the gpuos-trace DaemonSet
# (gpuos-trace-daemonset.yaml), by pod name or label selector, for a while,
# and brings the traces back (merged into one when the pods span nodes):
#
#   trace_pod.sh [-n NAMESPACE] (POD | -l SELECTOR) [-d DURATION] [-o OUT.gpuos]
#
# e.g.  trace_pod.sh -n ml -l job-name=resnet-ddp -d 60s -o resnet.gpuos
#
# For each pod: its node and its containers' ids (kubectl get pod), the
# gpuos-trace pod on that node, there the containers' host pids
# (find_container_pids: the id in /proc/PID/cgroup), then one
# `gpuos-trace --pid P... --duration D` per node, in parallel.
set -euo pipefail
ns=default selector= pod= duration=60s out=
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) ns=$2; shift 2 ;;
    -l) selector=$2; shift 2 ;;
    -d) duration=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "trace_pod.sh: unknown option $1" >&2; exit 2 ;;
    *) pod=$1; shift ;;
  esac
done
[[ -n $pod || -n $selector ]] || { echo "trace_pod.sh: name a pod or give -l SELECTOR" >&2; exit 2; }
TRACER_NS=${GPUOS_TRACE_NAMESPACE:-gpuos-trace}
stamp=$(date +%Y%m%d-%H%M%S)
out=${out:-gpuos-${pod:-${selector//[^A-Za-z0-9]/_}}-$stamp.gpuos}

# "node container-id" lines, one per running container.
if [[ -n $pod ]]; then sel=("$pod"); else sel=(-l "$selector"); fi
mapfile -t rows < <(kubectl get pod -n "$ns" "${sel[@]}" -o go-template='{{define "p"}}{{$n := .spec.nodeName}}{{range .status.containerStatuses}}{{if .containerID}}{{$n}} {{.containerID}}{{"\n"}}{{end}}{{end}}{{end}}{{if .items}}{{range .items}}{{template "p" .}}{{end}}{{else}}{{template "p" .}}{{end}}')
[[ ${#rows[@]} -gt 0 ]] || { echo "trace_pod.sh: no running container matches" >&2; exit 1; }

declare -A ids_by_node=()
for row in "${rows[@]}"; do
  node=${row%% *}; id=${row#* }
  ids_by_node[$node]+=" $id"
done

files=()
pids_of_jobs=()
for node in "${!ids_by_node[@]}"; do
  tracer=$(kubectl get pod -n "$TRACER_NS" -l app=gpuos-trace --field-selector "spec.nodeName=$node" -o name | head -1)
  [[ -n $tracer ]] || { echo "trace_pod.sh: no gpuos-trace pod on node $node (is the DaemonSet running?)" >&2; exit 1; }
  pid_args=()
  for id in ${ids_by_node[$node]}; do
    while read -r p; do pid_args+=(--pid "$p"); done < <(kubectl exec -n "$TRACER_NS" "$tracer" -- find_container_pids "$id")
  done
  remote=/traces/$node-$stamp.gpuos
  echo "trace_pod.sh: $node: gpuos-trace ${pid_args[*]} --duration $duration" >&2
  ( kubectl exec -n "$TRACER_NS" "$tracer" -- gpuos-trace -q "${pid_args[@]}" --duration "$duration" -o "$remote" &&
    kubectl cp -n "$TRACER_NS" "${tracer#pod/}:$remote" "./$node-$stamp.gpuos" >/dev/null ) &
  pids_of_jobs+=($!)
  files+=("./$node-$stamp.gpuos")
done
status=0
for j in "${pids_of_jobs[@]}"; do wait "$j" || status=1; done
[[ $status -eq 0 ]] || { echo "trace_pod.sh: a node's recording failed (see above)" >&2; exit 1; }
if [[ ${#files[@]} -eq 1 ]]; then
  mv "${files[0]}" "$out"
else
  # One job on several nodes: one trace on one clock.
  if ! command -v gpuos-trace >/dev/null; then
    echo "trace_pod.sh: per-node traces: ${files[*]}; merge them with: gpuos-trace merge ${files[*]} -o $out" >&2
    exit 0
  fi
  gpuos-trace merge "${files[@]}" -o "$out"
fi
echo "trace_pod.sh: wrote $out" >&2
