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
python3 - "$OUT/two_rank_gloo_report.json" "$rc" <<'PY'
import json, sys
rc = int(sys.argv[2])
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("two-rank gloo: FAIL no report (%s), job rc=%d" % (e, rc)); sys.exit(0)
ranks = d.get("ranks", [])
fails = []
if rc != 0: fails.append("job rc=%d" % rc)
if sorted(r["rank"] for r in ranks) != [0, 1]: fails.append("ranks %s" % [r["rank"] for r in ranks])
for r in ranks:
    if r["gpu"] is None: fails.append("rank %s: no gpu" % r["rank"])
    if r["steps"] < 30: fails.append("rank %s: %d steps" % (r["rank"], r["steps"]))
    if r["gpu_idle_ns"] is None: fails.append("rank %s: no GPU work" % r["rank"])
    if r["comm_ns"] <= 0: fails.append("rank %s: no communication" % r["rank"])
s = d.get("straggler")
if not s or s["rank"] != 1: fails.append("straggler %s" % s)
detail = "; ".join("rank %s gpu %s steps %d step %.1f ms comm %.1f exposed %.1f" % (
    r["rank"], r["gpu"], r["steps"], r["step_ns"]["mean"] / 1e6, r["comm_ns"] / 1e6, r["exposed_comm_ns"] / 1e6)
    for r in ranks)
if s: detail += "; straggler rank %d cause %s cost %.1f ms/step" % (s["rank"], s["cause"], s["cost_ns_per_step"] / 1e6)
print("two-rank gloo: %s %s" % ("FAIL " + ", ".join(fails) + ";" if fails else "PASS", detail))
PY
