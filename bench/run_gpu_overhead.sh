#!/usr/bin/env bash
# gpuos-trace's CUDA-side overhead on the GPU machine (issue 3, point 7),
# measured side by side in one run: for each workload, rounds of
# [untraced, under gpuos-trace, under torch.profiler] in alternating order,
# then the medians and the overheads relative to untraced.  A fourth
# variant, "CUPTI alone", runs each workload with a minimal CUPTI client
# injected by the driver (bench/cupti_floor_injection.cc: kernel and
# runtime-API records, nothing done with them): the floor under any tracer
# that records each kernel through CUPTI.
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
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
FLOOR="$OUT/libcupti_floor.so"
g++ -O2 -shared -fPIC -o "$FLOOR" "$HERE/cupti_floor_injection.cc" -I"$CUDA_HOME/extras/CUPTI/include" \
  -I"$CUDA_HOME/include" -L"$CUDA_HOME/extras/CUPTI/lib64" -L"$CUDA_HOME/lib64" -lcupti -lpthread \
  -Wl,-rpath,"$CUDA_HOME/lib64" >>"$OUT/nvcc_bench.log" 2>&1 ||
  echo "run_gpu_overhead: building the CUPTI-alone client failed (see $OUT/nvcc_bench.log)"

run() {  # run VARIANT WORKLOAD CMD...
  local variant=$1 workload=$2; shift 2
  local line
  if [ "$variant" = gpuos ]; then
    line=$("$TRACE" -q -o "$OUT/bench_${workload}.gpuos" -- "$@" 2>>"$OUT/bench.stderr" | tail -1)
  elif [ "$variant" = cupti ]; then
    line=$(CUDA_INJECTION64_PATH="$FLOOR" "$@" 2>>"$OUT/bench.stderr" | tail -1)
  else
    line=$("$@" 2>>"$OUT/bench.stderr" | tail -1)
  fi
  echo "{\"variant\": \"$variant\", \"workload\": \"$workload\", \"result\": ${line:-null}}" >>"$RESULTS"
}

for round in $(seq "$ROUNDS"); do
  # Rotate the order each round so drift does not favour one variant.
  case $((round % 4)) in
    0) order="untraced gpuos profiler cupti" ;;
    1) order="gpuos profiler cupti untraced" ;;
    2) order="profiler cupti untraced gpuos" ;;
    3) order="cupti untraced gpuos profiler" ;;
  esac
  for variant in $order; do
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

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rates = {}
for r in runs:
    if r["result"]:
        rates.setdefault((r["workload"], r["variant"]), []).append(r["result"]["rate"])
targets = {"py_launch": 15.0, "raw_launch": 15.0, "py_train": 5.0}
print()
print(f"{'workload':<11} {'untraced':>12} {'gpuos-trace':>12} {'overhead':>9} {'torch.prof':>12} {'overhead':>9} {'CUPTI alone':>12} {'overhead':>9} {'target':>7}  verdict")
for workload in ("py_launch", "raw_launch", "py_train"):
    base = rates.get((workload, "untraced"))
    if not base:
        continue
    b = statistics.median(base)
    g = statistics.median(rates.get((workload, "gpuos"), [float("nan")]))
    p = statistics.median(rates.get((workload, "profiler"), [float("nan")]))
    c = statistics.median(rates.get((workload, "cupti"), [float("nan")]))
    go = (1 - g / b) * 100
    po = (1 - p / b) * 100
    co = (1 - c / b) * 100
    t = targets[workload]
    verdict = "meets" if go <= t and (p != p or go < po) else "MISSES"
    print(f"{workload:<11} {b:>12.0f} {g:>12.0f} {go:>8.1f}% {p:>12.0f} {po:>8.1f}% {c:>12.0f} {co:>8.1f}% {t:>6.0f}%  {verdict}"
          f"  (n={len(base)} rounds, medians)")
PY
