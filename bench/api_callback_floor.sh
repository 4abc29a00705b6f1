#!/usr/bin/env bash
# Issue 3, point 7: can CUPTI's Callback API time the API calls for less
# than its RUNTIME/DRIVER activity records do, and do kernel records still
# carry the correlation id of a call timed that way?  On the GPU machine,
# with the minimal CUPTI client (bench/cupti_floor_injection.cc) only, no
# gpuos-trace:
#  1. correlation: the raw launch loop and the small training loop with
#     kernel records plus runtime and driver callbacks, CUPTI_FLOOR_VERIFY=1:
#     how many kernels' correlation ids match a timed call;
#  2. cost: bench/gpu_overhead_breakdown.sh with CUPTI-alone variants that
#     differ only in how API calls are timed, in rotating rounds; medians.
#   bench/api_callback_floor.sh [ROUNDS]
set -u
ROUNDS=${1:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d /tmp/gpuos-api-callback.XXXXXX)}
mkdir -p "$OUT"
export OUT
FLOOR="$OUT/libcupti_floor.so"
bash "$HERE/build_cupti_floor.sh" "$FLOOR" || { echo "api_callback_floor: building the CUPTI client failed"; exit 1; }
nvcc -O2 -arch=native -o "$OUT/cuda_launch_rate" "$HERE/cuda_launch_rate.cu" ||
  { echo "api_callback_floor: nvcc failed"; exit 1; }

echo "== correlation ids: kernel records against callback-timed calls"
for kinds in kernel,runtime-cb,driver-cb kernel,runtime-cb kernel,driver-cb; do
  echo "-- raw_launch, $kinds"
  CUPTI_FLOOR_VERIFY=1 CUPTI_FLOOR_VERBOSE=1 CUPTI_FLOOR_KINDS=$kinds CUDA_INJECTION64_PATH="$FLOOR" \
    "$OUT/cuda_launch_rate" 20000 2>&1 | grep cupti_floor
done
echo "-- py_train, kernel,runtime-cb,driver-cb"
CUPTI_FLOOR_VERIFY=1 CUPTI_FLOOR_VERBOSE=1 CUPTI_FLOOR_KINDS=kernel,runtime-cb,driver-cb \
  CUDA_INJECTION64_PATH="$FLOOR" python3 "$HERE/gpu_overhead.py" --mode train --iters 200 2>&1 | grep cupti_floor

echo "== cost, $ROUNDS rounds"
BREAKDOWN_VARIANTS=${API_CALLBACK_VARIANTS:-"untraced
cupti-alone:kernel
cupti-alone:kernel,runtime,driver
cupti-alone:kernel,runtime-cb,driver-cb
cupti-alone:kernel,runtime-cb"} \
  bash "$HERE/gpu_overhead_breakdown.sh" none "$ROUNDS"
