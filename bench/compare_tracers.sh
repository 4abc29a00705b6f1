#!/usr/bin/env bash
# Two gpuos-trace builds side by side: the per-syscall cost each adds to
# MODE (default getppid), one fresh tracer instance at a time, alternating
# between the builds round by round (bench/per_instance_cost.sh does each
# instance), then the medians.  For checking that a change to the BPF
# programs helps on a machine whose single runs spread widely.  Needs root.
#   bench/compare_tracers.sh BUILD_DIR OTHER_GPUOS_TRACE [ROUNDS] [MODE]
set -u
BUILD_DIR=${1:?usage: compare_tracers.sh BUILD_DIR OTHER_GPUOS_TRACE [ROUNDS] [MODE]}
OTHER=$(realpath "${2:?usage: compare_tracers.sh BUILD_DIR OTHER_GPUOS_TRACE [ROUNDS] [MODE]}")
ROUNDS=${3:-8}
MODE=${4:-getppid}
HERE=$(cd "$(dirname "$0")" && pwd)
ROWS=$(mktemp /tmp/gpuos-compare.XXXXXX)
trap 'rm -f "$ROWS"' EXIT
echo "this: $(realpath "$BUILD_DIR/gpuos-trace")  other: $OTHER  mode: $MODE  rounds: $ROUNDS (2 instances each)"
for r in $(seq "$ROUNDS"); do
  # Which build goes first alternates, so a drift of the machine hits both.
  order="this other"
  (( r % 2 == 0 )) && order="other this"
  for who in $order; do
    if [[ $who == other ]]; then tracer=$OTHER; else tracer=$(realpath "$BUILD_DIR/gpuos-trace"); fi
    PER_INSTANCE_TRACER=$tracer bash "$HERE/per_instance_cost.sh" "$BUILD_DIR" 2 "$MODE" | tail -n +2 |
      sed "s/^/$who /" | tee -a "$ROWS"
  done
done
python3 - "$ROWS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 8:
        continue
    rows.setdefault(f[0], []).append([float(x) for x in f[4:8]])
print()
print(f"{'build':6} {'n':>3} {'T-U cpu':>9} {'T-U wall':>9} {'enter ns/run':>13} {'exit ns/run':>12}   (medians)")
for who in ("this", "other"):
    r = rows.get(who, [])
    if not r:
        continue
    med = [statistics.median(col) for col in zip(*r)]
    print(f"{who:6} {len(r):3d} {med[0]:9.1f} {med[1]:9.1f} {med[2]:13.1f} {med[3]:12.1f}")
PY
