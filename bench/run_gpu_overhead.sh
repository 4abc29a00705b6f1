#!/usr/bin/env bash
# gpuos-trace's CUDA-side overhead on the GPU machine (issue 3, point 7),
# measured side by side in one run: for each workload, rounds of
# [untraced, under gpuos-trace, under gpuos-trace --cuda-records
# kernel,memcpy,memset ("lite"), under torch.profiler] in rotating order,
# then the medians and the overheads relative to untraced, of the raw rates
# and of the paced times per step (bench/cpu_pace.py).  A fifth variant,
# "CUPTI alone", runs each workload with a minimal CUPTI client injected by
# the driver (bench/cupti_floor_injection.cc) that enables lite's kinds
# (kernel, memcpy, memset records) and only walks them: the floor under any
# tracer that records every kernel, copy and set through CUPTI.
#   bench/run_gpu_overhead.sh [BIN_DIR] [ROUNDS]
# BIN_DIR holds gpuos-trace and libgpuos_shim.so (default build-gpu).
set -u
BIN_DIR=${1:-build-gpu}
ROUNDS=${2:-5}
OUT=${OUT:-$(mktemp -d /tmp/gpuos-gpu-bench.XXXXXX)}
mkdir -p "$OUT"
TRACE="$BIN_DIR/gpuos-trace"
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS="$OUT/overhead_runs.jsonl"
: >"$RESULTS"

nvcc -O2 -arch=native -o "$OUT/cuda_launch_rate" "$HERE/cuda_launch_rate.cu" >"$OUT/nvcc_bench.log" 2>&1 ||
  echo "run_gpu_overhead: nvcc failed (see $OUT/nvcc_bench.log)"
FLOOR="$OUT/libcupti_floor.so"
bash "$HERE/build_cupti_floor.sh" "$FLOOR" >>"$OUT/nvcc_bench.log" 2>&1 ||
  echo "run_gpu_overhead: building the CUPTI-alone client failed (see $OUT/nvcc_bench.log)"

run() {  # run VARIANT WORKLOAD CMD...
  local variant=$1 workload=$2; shift 2
  local line
  if [ "$variant" = gpuos ]; then
    line=$("$TRACE" -q -o "$OUT/bench_${workload}.gpuos" -- "$@" 2>>"$OUT/bench.stderr" | tail -1)
  elif [ "$variant" = gpuos-lite ]; then
    line=$("$TRACE" -q --cuda-records "$LITE_RECORDS" -o "$OUT/bench_${workload}.gpuos" -- "$@" \
      2>>"$OUT/bench.stderr" | tail -1)
  elif [ "$variant" = cupti ]; then
    line=$(CUDA_INJECTION64_PATH="$FLOOR" CUPTI_FLOOR_KINDS="$LITE_RECORDS" "$@" 2>>"$OUT/bench.stderr" |
      tail -1)
  else
    line=$("$@" 2>>"$OUT/bench.stderr" | tail -1)
  fi
  echo "{\"variant\": \"$variant\", \"workload\": \"$workload\", \"result\": ${line:-null}}" >>"$RESULTS"
}

# gpuos-lite: gpuos-trace keeping only these CUDA records (--cuda-records).
LITE_RECORDS=${GPU_OVERHEAD_LITE_RECORDS:-kernel,memcpy,memset}
VARIANTS=(untraced gpuos gpuos-lite profiler cupti)
for round in $(seq "$ROUNDS"); do
  # Rotate the order each round so drift does not favour one variant.
  shift_by=$(( (round - 1) % ${#VARIANTS[@]} ))
  for variant in "${VARIANTS[@]:$shift_by}" "${VARIANTS[@]:0:$shift_by}"; do
    [ "$variant" = cupti ] && [ ! -f "$FLOOR" ] && continue
    flag=""
    [ "$variant" = profiler ] && flag="--profiler"
    run "$variant" py_launch python3 "$HERE/gpu_overhead.py" --mode launch $flag
    run "$variant" py_train python3 "$HERE/gpu_overhead.py" --mode train $flag
    if [ "$variant" != profiler ] && [ -x "$OUT/cuda_launch_rate" ]; then
      run "$variant" raw_launch "$OUT/cuda_launch_rate"
    fi
  done
done

python3 "$HERE/summarize_gpu_runs.py" "$RESULTS" --headline
