#!/usr/bin/env bash
# Does CUPTI's per-launch CPU cost depend on where the process's threads
# run?  Single processes of launch_cpu under CUPTI's kernel records can fall
# into two groups about 1.5 us per launch apart, untraced ones not; on an
# H100 placement did not explain it (docs/archive/gpu-results.md: "does the
# cost depend on where threads run?").  This runs launch_cpu untraced and
# under the minimal CUPTI client (bench/cupti_floor_injection.cc), unpinned
# and pinned to CPU sets, alternating, and prints each run's cost with the
# CPUs its launching thread and CUPTI's worker thread were seen on.
#   bench/launch_cost_placement.sh [ROUNDS] [CPU_SETS]
# CPU_SETS: space-separated taskset lists (default "2 2,3 2,9").  GPU
# machine only; builds what it needs with nvcc and g++ into $OUT.
set -u
ROUNDS=${1:-4}
CPU_SETS=${2:-"2 2,3 2,9"}
OUT=${OUT:-$(mktemp -d /tmp/gpuos-placement.XXXXXX)}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
nvcc -O2 -arch=native -o "$OUT/cuda_launch_cpu_cost" "$HERE/cuda_launch_cpu_cost.cu" || exit 1
bash "$HERE/build_cupti_floor.sh" "$OUT/libcupti_floor.so" || exit 1
lscpu -e=CPU,CORE,SOCKET,NODE,CACHE 2>/dev/null | head -20
RESULTS="$OUT/placement_runs.jsonl"
: >"$RESULTS"
for round in $(seq "$ROUNDS"); do
  for pin in any $CPU_SETS; do
    for variant in untraced cupti-kernel; do
      cmd=("$OUT/cuda_launch_cpu_cost")
      [ "$pin" = any ] || cmd=(taskset -c "$pin" "${cmd[@]}")
      if [ "$variant" = untraced ]; then
        line=$("${cmd[@]}" 2>/dev/null | tail -1)
      else
        line=$(CUDA_INJECTION64_PATH="$OUT/libcupti_floor.so" CUPTI_FLOOR_KINDS=kernel \
          "${cmd[@]}" 2>/dev/null | tail -1)
      fi
      echo "{\"variant\": \"$variant\", \"pin\": \"$pin\", \"round\": $round, \"result\": ${line:-null}}" >>"$RESULTS"
    done
  done
done
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'variant':14} {'pin':6} {'ns/launch':>9}  launch CPUs  busiest other threads (comm@cpu ms)")
for r in sorted(runs, key=lambda r: (r["pin"], r["variant"], r["round"])):
    res = r["result"]
    if not res:
        print(f"{r['variant']:14} {r['pin']:6} {'failed':>9}")
        continue
    others = sorted(res.get("threads", [])[1:], key=lambda t: -t["cpu_ms"])[:3]
    print(f"{r['variant']:14} {r['pin']:6} {res['cpu_ns_per_launch']:9.0f}  "
          f"{','.join(map(str, res.get('launch_cpus', []))):11}  "
          + " ".join(f"{t['comm']}@{t['cpu']} {t['cpu_ms']:.0f}" for t in others))
print("\nmedians, ns per launch call:")
for pin in sorted({r["pin"] for r in runs}):
    cells = []
    for variant in ("untraced", "cupti-kernel"):
        v = [r["result"]["cpu_ns_per_launch"] for r in runs
             if r["pin"] == pin and r["variant"] == variant and r["result"]]
        cells.append(f"{variant} {statistics.median(v):6.0f} (n={len(v)}, {min(v):.0f}-{max(v):.0f})" if v else f"{variant} -")
    print(f"  pin {pin:6} " + "   ".join(cells))
PY
