#!/usr/bin/env bash
# ns added per traced event, with the traced and untraced loops in ONE
# process: each round starts a fresh overhead_workload with three phases,
# untraced (U1), traced by `gpuos-trace --pid` attached between phases (T),
# and untraced again after the tracer has stopped (U2).  The cost is
# T - (U1 + U2) / 2, per round, then the median over rounds.
#
# Why: on the GPU machine's host the untraced mmap+touch+munmap loop alone
# spreads by about 2 us per op from one process to the next (3.4-5.8 us,
# docs/archive/benchmarks.md), more than the 700 ns being measured, so
# run_overhead.sh's traced and untraced processes differ by more than the
# tracer's cost.  Within one process that spread is absent; U2 - U1 shows
# what is left of it.  The same BPF programs run as under `gpuos-trace --
# cmd`: attach mode only changes how the process becomes traced.
#   sudo bench/attach_overhead.sh [BUILD_DIR] [ROUNDS] [MODE...]
# ATTACH_OVERHEAD_PIN=CPU runs the workload on that CPU alone (futex-pingpong
# then switches context at every hand-off); the tracer runs anywhere.
set -u
BUILD_DIR=${1:-build}
ROUNDS=${2:-9}
shift 2 2>/dev/null || shift $#
CHOSEN=("$@")
TRACER=$(realpath "$BUILD_DIR/gpuos-trace")
WORKLOAD=$(realpath "$BUILD_DIR/bench/overhead_workload")
source "$(dirname "$0")/overhead_modes.sh"
((${#CHOSEN[@]})) && MODES=("${CHOSEN[@]}")
WORK=$(mktemp -d /tmp/gpuos-attach-overhead.XXXXXX)
TRACER_PID=""
cleanup() {
  [[ -n $TRACER_PID ]] && { kill -INT "$TRACER_PID" 2>/dev/null; wait "$TRACER_PID" 2>/dev/null; }
  [[ -n ${W_PID:-} ]] && kill "$W_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
[[ -d /sys/kernel/tracing/events ]] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

# How many operations of MODE the trace recorded for process PID: its
# syscalls, or its page faults (a loop's warm-up and set-up add a few).
traced_ops() {
  "$TRACER" report "$WORK/t.gpuos" --format json 2>/dev/null | python3 -c '
import json, sys
pid, mode = int(sys.argv[1]), sys.argv[2]
n = 0
for p in json.load(sys.stdin)["processes"]:
    if p["pid"] == pid:
        for t in p["threads"]:
            n += t["page_faults"] if mode == "page-fault" else t["syscalls"]["calls"]
print(n)' "$1" "$2" 2>/dev/null || echo 0
}

# Runs the phase the workload says it is ready for; prints its result line.
run_phase() {
  local ready result
  IFS= read -r -t 60 ready <&"${W[0]}" || { echo "attach_overhead: no ready line" >&2; return 1; }
  echo go >&"${W[1]}"
  IFS= read -r -t 120 result <&"${W[0]}" || { echo "attach_overhead: no result line" >&2; return 1; }
  echo "$result"
}

echo "# gpuos-trace overhead, traced and untraced phases of one process, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# host: $(nproc) CPUs, kernel $(uname -r); tracer: $TRACER ($("$TRACER" --version 2>&1))"
ROWS="$WORK/rows"
: >"$ROWS"
for mode in "${MODES[@]}"; do
  read -r -a args <<<"${MODE_ARGS[$mode]}"
  for r in $(seq "$ROUNDS"); do
    coproc W { exec ${ATTACH_OVERHEAD_PIN:+taskset -c "$ATTACH_OVERHEAD_PIN"} "$WORKLOAD" "$mode" "${args[@]}" --phases 3; }
    u1=$(run_phase) || exit 1
    # Attach; the file gets its header once the attach has begun, and the
    # process is tracked right after.
    rm -f "$WORK/t.gpuos"
    "$TRACER" -q --no-cuda --pid "$W_PID" -o "$WORK/t.gpuos" 2>"$WORK/tracer.err" &
    TRACER_PID=$!
    for _ in $(seq 1 200); do
      [[ $(stat -c %s "$WORK/t.gpuos" 2>/dev/null || echo 0) -gt 200 ]] && break
      sleep 0.05
    done
    # (The header is written before the BPF programs load; the check
    # below throws out a round whose traced phase was not all traced.)
    sleep 1
    t=$(run_phase) || exit 1
    kill -INT "$TRACER_PID"
    wait "$TRACER_PID" || { echo "attach_overhead: gpuos-trace failed:"; cat "$WORK/tracer.err"; } >&2
    TRACER_PID=""
    u2=$(run_phase) || exit 1
    pid=$W_PID
    wait "$W_PID" 2>/dev/null
    seen=$(traced_ops "$pid" "$mode")
    if ((seen < ${args[1]})); then
      echo "  $mode round $r: only $seen of ${args[1]} operations traced; left out"
      continue
    fi
    row="$mode $r"
    for key in cpu_ns_per_op ns_per_op; do
      row+=" $(field "$u1" $key) $(field "$t" $key) $(field "$u2" $key)"
    done
    echo "$row" | tee -a "$ROWS"
  done
done

python3 - "$ROWS" "$(declare -p MODE_TARGET)" <<'PY'
import re, statistics, sys
targets = dict(re.findall(r'\[([\w-]+)\]="?(\d+)', sys.argv[2]))
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append([float(x) for x in f[2:8]])
print()
print("medians over rounds; added = T - (U1+U2)/2 of each round; drift = U2 - U1")
print(f"{'mode':18} {'n':>3} {'U ns/op':>9} {'T ns/op':>9} {'added cpu':>10} {'added wall':>11} "
      f"{'target':>7} {'pass':>5} {'drift cpu':>10} {'added min..max':>16}")
for mode, rs in rows.items():
    added = [t - (u1 + u2) / 2 for u1, t, u2, *_ in rs]
    added_wall = [t - (u1 + u2) / 2 for *_, u1, t, u2 in rs]
    drift = [u2 - u1 for u1, _, u2, *_ in rs]
    med = statistics.median(added)
    # Modes without a target of issue #2 (futex-pingpong) print "-".
    target = float(targets[mode]) if mode in targets else None
    print(f"{mode:18} {len(rs):>3} {statistics.median(r[0] for r in rs):>9.1f} "
          f"{statistics.median(r[1] for r in rs):>9.1f} {med:>10.1f} {statistics.median(added_wall):>11.1f} "
          f"{'<=%d' % target if target is not None else '-':>7} "
          f"{('PASS' if med <= target else 'FAIL') if target is not None else '-':>5} "
          f"{statistics.median(drift):>10.1f} {min(added):>7.0f}..{max(added):<7.0f}")
PY
