#!/usr/bin/env bash
# The CUDA side's end-to-end check, run ON the GPU machine from the repo
# root in one call:
#   tests/gpu/run_gpu_checks.sh [BIN_DIR]      (BIN_DIR defaults to build-gpu/)
# BIN_DIR holds a prebuilt gpuos-trace and libgpuos_shim.so.  Builds
# tests/gpu/cuda_known_work.cu with nvcc, runs it once untraced and once
# under `gpuos-trace -o $OUT/known.gpuos --`, dumps the recording
# (`gpuos-trace dump`, one JSON event per line) and the JSON report, and
# checks counts, bytes, memory kinds and clock invariants with
# check_known_work.py, whose PASS/FAIL table comes last.  Everything lands
# in $OUT (a fresh temporary directory when unset).  Exit status 0 only when
# every check passed.
#
# Environment: OUT, GPUOS_CLOCK_TOLERANCE_NS (slack for the clock checks,
# default 0), NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc).
set -u

BIN_DIR=${1:-build-gpu}
OUT=${OUT:-$(mktemp -d /tmp/gpuos-gpu-checks.XXXXXX)}
mkdir -p "$OUT"
TRACE="$BIN_DIR/gpuos-trace"
SHIM="$BIN_DIR/libgpuos_shim.so"
HERE=$(cd "$(dirname "$0")" && pwd)
STEPS=()

step() {  # step NAME EXPECTED GOT
  STEPS+=(--step "$1=$2=$3")
}

echo "gpuos-trace GPU checks: binaries from $BIN_DIR, output in $OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4

for file in "$TRACE" "$SHIM"; do
  if [[ -e "$file" ]]; then step "present: $file" yes yes; else step "present: $file" yes no; fi
done

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" -O2 -std=c++17 -arch=native -lineinfo -o "$OUT/cuda_known_work" \
  "$HERE/cuda_known_work.cu" >"$OUT/nvcc.log" 2>&1
status=$?
step "nvcc cuda_known_work.cu (log: nvcc.log)" 0 "$status"

now_ns() { date +%s%N; }

# Untraced, first: if this fails, the machine is at fault, not the tracer.
start=$(now_ns)
"$OUT/cuda_known_work" >"$OUT/untraced.stdout" 2>"$OUT/untraced.stderr"
status=$?
untraced_ns=$(( $(now_ns) - start ))
step "untraced run exit status" 0 "$status"

# GPUOS_SHIM_DEBUG makes the shim say on stderr why, when CUPTI steps aside.
start=$(now_ns)
GPUOS_SHIM_DEBUG=1 "$TRACE" --shim "$(realpath "$SHIM" 2>/dev/null || echo "$SHIM")" \
  -o "$OUT/known.gpuos" -- "$OUT/cuda_known_work" \
  >"$OUT/known_work.stdout" 2>"$OUT/trace.stderr"
status=$?
traced_ns=$(( $(now_ns) - start ))
step "traced run exit status (stderr: trace.stderr)" 0 "$status"
if (( untraced_ns > 0 )); then
  step "wall time traced/untraced (info)" - \
    "$(awk -v t="$traced_ns" -v u="$untraced_ns" 'BEGIN { printf "%.2fx (%.2fs/%.2fs)", t/u, t/1e9, u/1e9 }')"
fi

"$TRACE" dump "$OUT/known.gpuos" >"$OUT/events.jsonl" 2>"$OUT/dump.stderr"
step "gpuos-trace dump exit status" 0 "$?"
"$TRACE" report "$OUT/known.gpuos" --format json >"$OUT/report.json" 2>"$OUT/report.stderr"
step "gpuos-trace report --format json exit status" 0 "$?"
if python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$OUT/report.json" 2>/dev/null; then
  step "report.json is JSON" yes yes
else
  step "report.json is JSON" yes no
fi

python3 "$HERE/check_known_work.py" "${STEPS[@]}" \
  --expect "$OUT/known_work.stdout" --events "$OUT/events.jsonl" \
  --tolerance-ns "${GPUOS_CLOCK_TOLERANCE_NS:-0}"
