#!/usr/bin/env bash
# What a running gpuos-trace costs processes it does not trace, for two
# builds side by side: rounds of [no tracer, this build, the other build]
# in rotating order, each running the untraced workload loop (MODE,
# default getppid) while the tracer, if any, records an unrelated `sleep`.
# Prints per build the median on-CPU ns per call added over the no-tracer
# runs (B-U), and the median run time of the syscall programs over those
# untraced calls (kernel.bpf_stats_enabled: includes bpf_stats' own clock
# reads, so compare builds, not absolute values).  Needs root.
#   bench/compare_untraced.sh BUILD_DIR OTHER_GPUOS_TRACE [ROUNDS] [MODE]
set -u
BUILD_DIR=${1:?usage: compare_untraced.sh BUILD_DIR OTHER_GPUOS_TRACE [ROUNDS] [MODE]}
OTHER=$(realpath "${2:?usage: compare_untraced.sh BUILD_DIR OTHER_GPUOS_TRACE [ROUNDS] [MODE]}")
ROUNDS=${3:-8}
MODE=${4:-getppid}
THIS=$(realpath "$BUILD_DIR/gpuos-trace")
WORKLOAD=$(realpath "$BUILD_DIR/bench/overhead_workload")
COUNT=$(realpath "$BUILD_DIR/bench/count_bpf_programs")
WORK=$(mktemp -d /tmp/gpuos-untraced.XXXXXX)
BG_PID=""
cleanup() {
  sysctl -qw kernel.bpf_stats_enabled=0
  [[ -n $BG_PID ]] && { kill -INT "$BG_PID" 2>/dev/null; wait "$BG_PID" 2>/dev/null; }
  rm -rf "$WORK"
}
trap cleanup EXIT
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

# One untraced run of the loop, with the tracer TRACER (or none) recording
# `sleep` meanwhile: "cpu_ns_per_op enter_ns_per_run exit_ns_per_run".
run_once() {
  local tracer=$1 line stats enter exit_
  if [[ $tracer != none ]]; then
    "$tracer" -q --no-cuda -o "$WORK/bg.gpuos" -- sleep 600 &
    BG_PID=$!
    for _ in $(seq 1 300); do pgrep -x -P "$BG_PID" sleep >/dev/null && break; sleep 0.05; done
  fi
  line=$("$WORKLOAD" "$MODE" --ops 300000 --warmup 30000)
  # The programs' run times over a second, shorter loop: bpf_stats' clock
  # reads would inflate the first one's B-U.
  sysctl -qw kernel.bpf_stats_enabled=1
  "$WORKLOAD" "$MODE" --ops 100000 --warmup 0 >/dev/null
  sysctl -qw kernel.bpf_stats_enabled=0
  enter=nan exit_=nan
  if [[ $tracer != none ]]; then
    stats=$("$COUNT" --stats handle_sys_enter handle_sys_exit)
    enter=$(field "$(grep 'prog=handle_sys_enter' <<<"$stats" | tail -1)" ns_per_run)
    exit_=$(field "$(grep 'prog=handle_sys_exit' <<<"$stats" | tail -1)" ns_per_run)
    kill -INT "$BG_PID"; wait "$BG_PID" 2>/dev/null; BG_PID=""
  fi
  echo "$(field "$line" cpu_ns_per_op) ${enter:-nan} ${exit_:-nan}"
}

echo "this: $THIS  other: $OTHER  mode: $MODE  rounds: $ROUNDS"
ROWS="$WORK/rows"
order=(none this other)
for r in $(seq "$ROUNDS"); do
  shift_by=$(( (r - 1) % 3 ))
  for who in "${order[@]:$shift_by}" "${order[@]:0:$shift_by}"; do
    case $who in none) t=none ;; this) t=$THIS ;; other) t=$OTHER ;; esac
    echo "$r $who $(run_once "$t")" | tee -a "$ROWS"
  done
done
python3 - "$ROWS" <<'PY'
import math, statistics, sys
runs = {}
order = []
for line in open(sys.argv[1]):
    r, who, cpu, enter, exit_ = line.split()
    runs.setdefault(who, []).append((int(r), float(cpu), float(enter), float(exit_)))
base = {r: cpu for r, cpu, _, _ in runs.get("none", [])}
print()
print(f"{'tracer':6} {'n':>3} {'U cpu ns/op':>12} {'B-U ns':>8} {'enter ns/run':>13} {'exit ns/run':>12}   (medians; B-U against the same round's no-tracer run)")
for who in ("none", "this", "other"):
    rows = runs.get(who, [])
    if not rows:
        continue
    cpu = statistics.median(c for _, c, _, _ in rows)
    diffs = [c - base[r] for r, c, _, _ in rows if r in base]
    enter = [e for _, _, e, _ in rows if not math.isnan(e)]
    ex = [x for _, _, _, x in rows if not math.isnan(x)]
    med = lambda v: f"{statistics.median(v):.1f}" if v else "-"
    print(f"{who:6} {len(rows):>3} {cpu:>12.1f} {med(diffs):>8} {med(enter):>13} {med(ex):>12}")
PY
