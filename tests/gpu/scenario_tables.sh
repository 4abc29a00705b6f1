#!/usr/bin/env bash
# The seeds' scenario tables (issue 22), remade with `gpuos-trace sweep` and
# `gpuos-trace compare` on the workloads of workloads/python/:
#   resnet-sequence   ResNet-18 data pipeline: baseline, workers, pinned, prefetch
#   workers-mlp       num_workers 0..16, the lightweight MLP (the practical guide)
#   transfers         pageable vs pinned x small vs large batch (MLP loader)
#   workers-resnet    num_workers 0..8, the ResNet-18 data pipeline
#   compile           eager vs torch.compile x small vs large MLP
#
#   tests/gpu/scenario_tables.sh [BIN_DIR] [SCENARIOS]
# BIN_DIR holds gpuos-trace (default build-gpu); SCENARIOS a comma list
# (default: all, in the order above).  GPUOS_SCENARIO_MODE=gpu|cpu (default:
# gpu when nvidia-smi sees a GPU): cpu runs tiny sizes on the CPU, to check
# the script.  GPUOS_SCENARIO_BUDGET_S (default 330) starts no scenario
# after that long (it says so), so the part fits its ~6 minutes.
# Output in $OUT/scenarios/ (default ./scenario-out): per scenario the
# sweep's traces and logs, NAME.txt (the table), NAME.json (compare
# --format json), NAME.html; and scenario-tables.md, every table with the
# device and date, for docs/.  The tables are printed too.
set -u
BIN_DIR=${1:-build-gpu}
SCENARIOS=${2:-resnet-sequence,workers-mlp,transfers,workers-resnet,compile}
TRACE=$(cd "$BIN_DIR" && pwd)/gpuos-trace
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYDIR=$ROOT/workloads/python
DIR=${OUT:-$PWD/scenario-out}/scenarios
PY=${PY:-python3}
BUDGET_S=${GPUOS_SCENARIO_BUDGET_S:-330}
MODE=${GPUOS_SCENARIO_MODE:-}
if [[ -z $MODE ]]; then
  if nvidia-smi -L >/dev/null 2>&1; then MODE=gpu; else MODE=cpu; fi
fi
mkdir -p "$DIR" || exit 1
MD=$DIR/scenario-tables.md
DEVICE=$( (nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) || true)
[[ -n $DEVICE ]] || DEVICE="CPU only ($(nproc) cores)"
{
  echo "# Scenario tables (gpuos-trace sweep / compare)"
  echo
  echo "Device: $DEVICE; kernel $(uname -r); $("$PY" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null);"
  echo "date: $(date -u +%FT%TZ); mode: $MODE; made by tests/gpu/scenario_tables.sh."
} >"$MD"
want() { [[ ",$SCENARIOS," == *",$1,"* ]]; }
SECONDS=0
STATUS=0

# scenario NAME TITLE WARMUP SWEEP-ARGS... : one sweep, its table kept.
scenario() {
  local name=$1 title=$2 warmup=$3
  shift 3
  if ((SECONDS > BUDGET_S)); then
    echo "== $name: skipped (budget of ${BUDGET_S}s spent)"
    printf '\n## %s\n\nskipped: the budget of %ss was spent\n' "$title" "$BUDGET_S" >>"$MD"
    return
  fi
  echo "== $name: $title"
  rm -rf "${DIR:?}/$name"
  local start=$SECONDS rc=0
  "$TRACE" sweep -o "$DIR/$name" --warmup-steps "$warmup" --html "$DIR/$name.html" "$@" \
    >"$DIR/$name.txt" 2>"$DIR/$name.stderr" || rc=$?
  "$TRACE" compare "$DIR/$name"/*.gpuos --warmup-steps "$warmup" --format json >"$DIR/$name.json" 2>/dev/null
  cat "$DIR/$name.txt"
  [[ $rc == 0 ]] || { STATUS=1; grep -E "failed|error" "$DIR/$name.stderr" | head -5; }
  echo "-- $name: exit $rc in $((SECONDS - start))s"
  {
    printf '\n## %s\n\n(%ss, sweep exit %s)\n\n```\n' "$title" "$((SECONDS - start))" "$rc"
    cat "$DIR/$name.txt"
    printf '```\n'
  } >>"$MD"
}

if [[ $MODE == gpu ]]; then
  DEV=cuda
  RESNET=(--steps 8 --warmup 2)
  RESNET_W=2
  MLP=(--steps 40 --warmup 5 --batch-size 256 --preprocess-us 50)
  MLP_W=5
  XFER=(--steps 30 --warmup 5 --num-workers 4)
  XFER_W=5
  XFER_BATCHES=64,2048
  WORKERS_MLP=0,2,4,8,16
  WORKERS_RESNET=0,2,4,8
  COMPILE=(--steps 20 --warmup 5)
  COMPILE_W=5
  COMPILE_ONLY=eager,compiled
else
  DEV=cpu
  RESNET=(--steps 4 --warmup 1 --image-size 32 --batch-size 4)
  RESNET_W=1
  MLP=(--steps 8 --warmup 2 --batch-size 16 --hidden 32 --preprocess-us 200)
  MLP_W=2
  XFER=(--steps 8 --warmup 2 --num-workers 2 --hidden 32)
  XFER_W=2
  XFER_BATCHES=16,256
  WORKERS_MLP=0,2
  WORKERS_RESNET=0,2
  COMPILE=(--steps 6 --warmup 2 --hidden 32 --layers 2)
  COMPILE_W=2
  COMPILE_ONLY=eager  # torch.compile needs PyTorch 2 (Debian's is 1.13)
fi

want resnet-sequence && scenario resnet-sequence "ResNet-18 data pipeline: the optimization sequence" "$RESNET_W" \
  --set variant=baseline,workers,pinned,prefetch -- \
  "$PY" "$PYDIR/resnet_data_pipeline.py" --device $DEV --variant '{variant}' "${RESNET[@]}"

want workers-mlp && scenario workers-mlp "num_workers sweep, lightweight MLP" "$MLP_W" \
  --set workers=$WORKERS_MLP -- \
  "$PY" "$PYDIR/dataloader_sweep.py" --device $DEV --num-workers '{workers}' "${MLP[@]}"

if want transfers; then
  # Two sweeps over the batch size, pageable then pinned, compared as one table.
  scenario transfers-pageable "batch sizes, pageable memory" "$XFER_W" --set batch=$XFER_BATCHES -- \
    "$PY" "$PYDIR/dataloader_sweep.py" --device $DEV --batch-size '{batch}' "${XFER[@]}"
  scenario transfers-pinned "batch sizes, pinned memory + non_blocking" "$XFER_W" --set batch=$XFER_BATCHES -- \
    "$PY" "$PYDIR/dataloader_sweep.py" --device $DEV --batch-size '{batch}' --pin-memory "${XFER[@]}"
  shopt -s nullglob
  runs=("$DIR"/transfers-pageable/*.gpuos "$DIR"/transfers-pinned/*.gpuos)
  if ((${#runs[@]} == 4)); then
    small=${XFER_BATCHES%,*} large=${XFER_BATCHES#*,}
    echo "== transfers: pageable vs pinned x small vs large batch"
    "$TRACE" compare "${runs[@]}" --warmup-steps "$XFER_W" --names "pageable-$small,pageable-$large,pinned-$small,pinned-$large" \
      --html "$DIR/transfers.html" | tee "$DIR/transfers.txt"
    "$TRACE" compare "${runs[@]}" --warmup-steps "$XFER_W" --format json \
      --names "pageable-$small,pageable-$large,pinned-$small,pinned-$large" >"$DIR/transfers.json"
    { printf '\n## pageable vs pinned, small vs large batch\n\n```\n'; cat "$DIR/transfers.txt"; printf '```\n'; } >>"$MD"
  else
    echo "== transfers: ${#runs[@]} of 4 traces; no combined table"
    STATUS=1
  fi
fi

want workers-resnet && scenario workers-resnet "num_workers sweep, ResNet-18 data pipeline" "$RESNET_W" \
  --set workers=$WORKERS_RESNET -- \
  "$PY" "$PYDIR/resnet_data_pipeline.py" --device $DEV --variant workers --num-workers '{workers}' "${RESNET[@]}"

# Last: compiling takes longest.  One run per (model, half).
want compile && scenario compile "eager vs torch.compile, small and large MLP" "$COMPILE_W" \
  --set model=small,large --set only=$COMPILE_ONLY -- \
  "$PY" "$PYDIR/compile_eager.py" --device $DEV --model '{model}' --only '{only}' "${COMPILE[@]}"

echo
echo "scenario tables: $MD (${SECONDS}s)"
exit $STATUS
