#!/usr/bin/env bash
# CUPTI's own cost on a raw launch loop, measured inside one process
# (bench/cupti_phase_ab.cu: phases with CUPTI's kinds off and on), for
# several kinds, CUPTI initialised before or after CUDA, and the CUDA
# runtime linked statically (nvcc's default) or shared.  Runs on the GPU
# machine; prints one JSON line per run, then a table.
#   bench/run_cupti_phase_ab.sh [REPEATS]
set -u
REPEATS=${1:-2}
OUT=${OUT:-$(mktemp -d /tmp/gpuos-phase-ab.XXXXXX)}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUPTI_FLAGS=(-I"$CUDA_HOME/extras/CUPTI/include" -L"$CUDA_HOME/extras/CUPTI/lib64" -L"$CUDA_HOME/lib64"
  -lcupti -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64")
nvcc -O2 -arch=native -o "$OUT/phase_ab_static" "$HERE/cupti_phase_ab.cu" "${CUPTI_FLAGS[@]}" || exit 1
nvcc -O2 -arch=native -cudart shared -o "$OUT/phase_ab_shared" "$HERE/cupti_phase_ab.cu" "${CUPTI_FLAGS[@]}" || exit 1
RESULTS="$OUT/phase_ab.jsonl"
: >"$RESULTS"
MATRIX=${PHASE_AB_MATRIX:-"static kernel early default
static kernel late default
static runtime early default
static kernel,runtime early default
static kernel,runtime late default
static kernel,runtime early monotonic
shared kernel,runtime early default
shared kernel,runtime late default"}
for _ in $(seq "$REPEATS"); do
  while read -r cudart kinds init clock; do
    [ -n "$cudart" ] || continue
    line=$("$OUT/phase_ab_$cudart" --kinds "$kinds" --init "$init" --clock "$clock" \
      --phases "${PHASE_AB_PHASES:-10}" 2>/dev/null | tail -1)
    echo "{\"cudart\": \"$cudart\", \"result\": ${line:-null}}" | tee -a "$RESULTS"
  done <<<"$MATRIX"
done
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["result"]:
        x = r["result"]
        rows.setdefault((r["cudart"], x["kinds"], x["init"], x["clock"]), []).append(x["overhead_pct"])
print()
print(f"{'cudart':<7} {'kinds':<16} {'CUPTI init':<10} {'clock':<10} {'overhead (each run: 1 - median on/median off)'}")
for (cudart, kinds, init, clock), v in rows.items():
    print(f"{cudart:<7} {kinds:<16} {init:<10} {clock:<10} " + "  ".join(f"{o:5.1f}%" for o in v))
PY
