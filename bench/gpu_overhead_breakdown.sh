#!/usr/bin/env bash
# Where gpuos-trace's CUDA-side overhead comes from, on the GPU machine: the
# raw launch loop and the small training loop, untraced and under
# gpuos-trace with the eBPF side only (--no-cuda) and with growing sets of
# CUPTI activity kinds (GPUOS_CUPTI_KINDS), in alternating rounds; medians.
#   bench/gpu_overhead_breakdown.sh [BIN_DIR] [ROUNDS]
set -u
BIN_DIR=${1:-build-gpu}
ROUNDS=${2:-3}
OUT=${OUT:-$(mktemp -d /tmp/gpuos-gpu-breakdown.XXXXXX)}
TRACE="$BIN_DIR/gpuos-trace"
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS="$OUT/breakdown_runs.jsonl"
: >"$RESULTS"
[ -x "$OUT/cuda_launch_rate" ] || nvcc -O2 -arch=native -o "$OUT/cuda_launch_rate" "$HERE/cuda_launch_rate.cu"

VARIANTS=(untraced ebpf-only kernel kernel,runtime kernel,runtime,memcpy,memset,sync kernel,runtime,driver,memcpy,memset,sync)
for round in $(seq "$ROUNDS"); do
  for variant in "${VARIANTS[@]}"; do
    for workload in raw_launch py_train; do
      if [ $workload = raw_launch ]; then cmd=("$OUT/cuda_launch_rate"); else cmd=(python3 "$HERE/gpu_overhead.py" --mode train); fi
      case $variant in
        untraced) line=$("${cmd[@]}" 2>/dev/null | tail -1) ;;
        ebpf-only) line=$("$TRACE" -q --no-cuda -o "$OUT/b.gpuos" -- "${cmd[@]}" 2>/dev/null | tail -1) ;;
        *) line=$(GPUOS_CUPTI_KINDS=$variant "$TRACE" -q -o "$OUT/b.gpuos" -- "${cmd[@]}" 2>/dev/null | tail -1) ;;
      esac
      echo "{\"variant\": \"$variant\", \"workload\": \"$workload\", \"result\": ${line:-null}}" >>"$RESULTS"
    done
  done
done
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rates = {}
for r in runs:
    if r["result"]:
        rates.setdefault((r["workload"], r["variant"]), []).append(r["result"]["rate"])
print()
print(f"{'workload':<11} {'variant':<44} {'median rate':>12} {'overhead':>9}")
for workload in ("raw_launch", "py_train"):
    base = statistics.median(rates[(workload, "untraced")])
    for (w, v), values in rates.items():
        if w == workload:
            m = statistics.median(values)
            print(f"{workload:<11} {v:<44} {m:>12.0f} {(1 - m / base) * 100:>8.1f}%")
PY
