#!/usr/bin/env bash
# Where gpuos-trace's CUDA-side overhead comes from, on the GPU machine: the
# raw launch loop and the small training loop, untraced and under
# gpuos-trace in variants that differ only in the environment the shim sees
# (which CUPTI activity kinds, which clock, which thread ids), in
# alternating rounds; medians.  Prints figures, not a test.
#   bench/gpu_overhead_breakdown.sh [BIN_DIR] [ROUNDS]
# BREAKDOWN_VARIANTS: one variant per line, "name" then the environment
# (VAR=value ...) and gpuos-trace options (--...); "untraced" is special,
# and "cupti-alone:KINDS" runs the workload with a minimal CUPTI client
# injected by the driver (bench/cupti_floor_injection.cc) recording those
# kinds, no gpuos-trace: the floor under any CUPTI-based tracer (its
# CUPTI_FLOOR_* knobs go in the environment words; a name after a second
# colon tells two such variants apart: "cupti-alone:kernel:pinned").
# BREAKDOWN_PIN: a CPU list; every workload then runs under
# `taskset -c LIST` (inside gpuos-trace, so the agent is not pinned), which
# takes the variation between runs from where the scheduler put them.
# BREAKDOWN_TRAIN_ITERS: steps of the timed training loop (default 1000).
# BREAKDOWN_WORKLOADS: raw_launch, py_launch, py_train, api_calls
# (bench/cuda_api_call_rate.cu: the per-call CPU cost alone), launch_cpu
# (bench/cuda_launch_cpu_cost.cu: the CPU time of one launch call, with the
# launch queue never full), and graph_kernels
# (bench/cuda_graph_kernel_time.cu: the GPU time of tiny kernels replayed
# from a CUDA graph, the per-kernel GPU-side cost alone).
# The variants run in a rotating order, so drift favours none of them.
set -u
BIN_DIR=${1:-build-gpu}
ROUNDS=${2:-3}
OUT=${OUT:-$(mktemp -d /tmp/gpuos-gpu-breakdown.XXXXXX)}
mkdir -p "$OUT"
TRACE="$BIN_DIR/gpuos-trace"
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS="$OUT/breakdown_runs.jsonl"
: >"$RESULTS"
[ -x "$OUT/cuda_launch_rate" ] || nvcc -O2 -arch=native -o "$OUT/cuda_launch_rate" "$HERE/cuda_launch_rate.cu"
[ -x "$OUT/cuda_api_call_rate" ] || nvcc -O2 -arch=native -o "$OUT/cuda_api_call_rate" "$HERE/cuda_api_call_rate.cu"
[ -x "$OUT/cuda_launch_cpu_cost" ] || nvcc -O2 -arch=native -o "$OUT/cuda_launch_cpu_cost" "$HERE/cuda_launch_cpu_cost.cu"
[ -x "$OUT/cuda_graph_kernel_time" ] || nvcc -O2 -arch=native -o "$OUT/cuda_graph_kernel_time" "$HERE/cuda_graph_kernel_time.cu"
FLOOR="$OUT/libcupti_floor.so"
[ -f "$FLOOR" ] || bash "$HERE/build_cupti_floor.sh" "$FLOOR"

DEFAULT_VARIANTS="untraced
ebpf-only --no-cuda
kernel GPUOS_CUPTI_KINDS=kernel
kernel,runtime GPUOS_CUPTI_KINDS=kernel,runtime
kernel,runtime,memcpy,memset,sync GPUOS_CUPTI_KINDS=kernel,runtime,memcpy,memset,sync
all-kinds"
mapfile -t VARIANTS <<<"${BREAKDOWN_VARIANTS:-$DEFAULT_VARIANTS}"
WORKLOADS=${BREAKDOWN_WORKLOADS:-raw_launch py_train}

PIN=()
[ -n "${BREAKDOWN_PIN:-}" ] && PIN=(taskset -c "$BREAKDOWN_PIN")

for round in $(seq "$ROUNDS"); do
  shift_by=$(( (round - 1) % ${#VARIANTS[@]} ))
  for spec in "${VARIANTS[@]:$shift_by}" "${VARIANTS[@]:0:$shift_by}"; do
    read -r variant rest <<<"$spec"
    [ -n "$variant" ] || continue
    envs=(); opts=()
    for word in $rest; do
      if [[ $word == --* ]]; then opts+=("$word"); else envs+=("$word"); fi
    done
    for workload in $WORKLOADS; do
      case $workload in
        raw_launch) cmd=("${PIN[@]}" "$OUT/cuda_launch_rate") ;;
        api_calls) cmd=("${PIN[@]}" "$OUT/cuda_api_call_rate") ;;
        launch_cpu) cmd=("${PIN[@]}" "$OUT/cuda_launch_cpu_cost") ;;
        graph_kernels) cmd=("${PIN[@]}" "$OUT/cuda_graph_kernel_time") ;;
        py_launch) cmd=("${PIN[@]}" python3 "$HERE/gpu_overhead.py" --mode launch) ;;
        py_train) cmd=("${PIN[@]}" python3 "$HERE/gpu_overhead.py" --mode train ${BREAKDOWN_TRAIN_ITERS:+--iters "$BREAKDOWN_TRAIN_ITERS"}) ;;
      esac
      case $variant in
        untraced) line=$("${cmd[@]}" 2>/dev/null | tail -1) ;;
        cupti-alone:*)
          kinds=${variant#cupti-alone:}
          line=$(env "${envs[@]}" CUDA_INJECTION64_PATH="$FLOOR" CUPTI_FLOOR_KINDS="${kinds%%:*}" "${cmd[@]}" \
            2>/dev/null | tail -1) ;;
        *) line=$(env "${envs[@]}" "$TRACE" -q "${opts[@]}" -o "$OUT/b.gpuos" -- "${cmd[@]}" 2>/dev/null | tail -1) ;;
      esac
      echo "{\"variant\": \"$variant\", \"workload\": \"$workload\", \"result\": ${line:-null}}" >>"$RESULTS"
    done
  done
done
python3 "$HERE/summarize_gpu_runs.py" "$RESULTS"
