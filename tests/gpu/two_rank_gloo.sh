#!/usr/bin/env bash
# Two DDP ranks with gloo sharing the one GPU, traced launched by
# gpuos-trace, reported per rank (issue 23): from the repo root,
#   tests/gpu/two_rank_gloo.sh [BIN_DIR]
# BIN_DIR (default build-gpu) holds the static gpuos-trace (and the shim and
# python_hooks/ beside it, as deploy/make_gpu_bundle.sh leaves them).  Rank 1
# is slowed by 30 ms of extra preprocessing per batch.  Prints the per-rank
# table and one line "two-rank gloo: PASS|FAIL ..." last: PASS when both
# ranks are found with their numbers, the GPU, their own steps and GPU work,
# and rank 1 is named the straggler.  About a minute; writes to $OUT (or
# ./gpu-session-out).
set -u
BIN_DIR=${1:-build-gpu}
OUT=${OUT:-$PWD/gpu-session-out}
mkdir -p "$OUT"
TRACE="$BIN_DIR/gpuos-trace"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
timeout 150 "$TRACE" -q -o "$OUT/two_rank_gloo.gpuos" -- python3 "$ROOT/workloads/ddp/launch_ranks.py" --nproc 2 -- \
  "$ROOT/workloads/ddp/train_ddp.py" --device cuda --steps 60 --hidden 1024 --slow-rank 1 \
  --extra-preprocess-ms 30 >"$OUT/two_rank_gloo.log" 2>&1
rc=$?
"$TRACE" report "$OUT/two_rank_gloo.gpuos" >"$OUT/two_rank_gloo_report.txt" 2>&1
"$TRACE" report "$OUT/two_rank_gloo.gpuos" --format json >"$OUT/two_rank_gloo_report.json" 2>/dev/null
sed -n '/^Ranks (/,/^$/p' "$OUT/two_rank_gloo_report.txt"
python3 "$HERE/check_ranks_report.py" --label "two-rank gloo" --report "$OUT/two_rank_gloo_report.json" \
  --world 2 --straggler 1 --min-steps 30 --job-rc "$rc"
