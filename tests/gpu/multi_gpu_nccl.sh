#!/usr/bin/env bash
# Multi-GPU NCCL runs of the multi-rank support (issues 23 and 24), in one
# call on a machine with 2 or more GPUs, from the repo root:
#   tests/gpu/multi_gpu_nccl.sh [BIN_DIR] [PARTS]
# BIN_DIR (default build-gpu) holds deploy/make_gpu_bundle.sh's bundle.
# The job: torchrun, one rank per GPU, DDP ResNet-18 with NCCL fed by a
# DataLoader with 4 workers each (workloads/ddp/train_ddp.py).  PARTS, a
# comma list (default all):
#   launched   traced from the start, balanced: every rank with its number
#              and GPU, its kernels including NCCL's, communication and
#              exposed communication per step, and no straggler named
#   straggler  rank 1 with 60 ms of extra preprocessing per batch in its
#              workers, launched: rank 1 named, with its cause and cost
#   attached   the straggler job started untraced, `--pid` on torchrun for
#              10 s: the same ranks and straggler; the job finishes after
#   imbalance  (not in the default) the balanced job twice untraced and
#              twice launched (GPUOS_IMBALANCE_RECORD: one launch per option set):
#              each rank's training-thread CPU per step and
#              its top syscalls, side by side
#   overhead   untraced, launched and --always-on, alternating, medians of
#              GPUOS_NCCL_ROUNDS (default 5) rounds of the slowest rank's
#              mean step (the job's own timing, warm-up left out)
#   exports    the launched, straggler and attached traces exported and
#              loaded in Perfetto's trace processor (GPUOS_TRACE_PROCESSOR),
#              held to the report's counts (tests/trace_processor/)
# Prints one line per check and a table last.  Writes to $OUT (or
# ./gpu-session-out); GPU_SESSION_WORK=DIR works there and leaves in $OUT
# only the table and one archive of the logs and reports.
set -u
BIN_DIR=${1:-build-gpu}
PARTS=${2:-launched,straggler,attached,overhead,exports}
OUT=${OUT:-$PWD/gpu-session-out}
RESULTS_DIR=$OUT
[ -n "${GPU_SESSION_WORK:-}" ] && OUT=$GPU_SESSION_WORK
mkdir -p "$OUT" "$RESULTS_DIR"
TRACE="$BIN_DIR/gpuos-trace"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
want() { [[ ",$PARTS," == *",$1,"* ]]; }
ROWS=()
row() { ROWS+=("$(printf '%-30s %-6s %s' "$1" "$2" "$3")"); }
SECONDS=0

NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tee "$OUT/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' |
  tee -a "$OUT/gpu.txt"
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
if [ "$NGPU" -lt 2 ]; then
  echo "multi-GPU NCCL: SKIP: $NGPU GPU here, 2 or more wanted"
  exit 0
fi
if command -v torchrun >/dev/null; then TORCHRUN=(torchrun); else TORCHRUN=(python3 -m torch.distributed.run); fi
JOB=("${TORCHRUN[@]}" --standalone --nproc-per-node "$NGPU" "$ROOT/workloads/ddp/train_ddp.py" --model resnet18
     --device cuda --backend nccl --batch 64 --workers 4)
STRAGGLER=(--slow-rank 1 --extra-preprocess-ms 60)

# check LABEL TRACE JOB_RC STRAGGLER: the report, dump and rank checks.
check() {
  local label=$1 trace=$2 rc=$3 straggler=$4 line
  "$TRACE" report "$trace" >"$OUT/$label.report.txt" 2>&1
  "$TRACE" report "$trace" --format json >"$OUT/$label.report.json" 2>"$OUT/$label.report.err"
  "$TRACE" dump "$trace" >"$OUT/$label.jsonl" 2>/dev/null
  sed -n '/^Ranks (/,/^$/p' "$OUT/$label.report.txt"
  python3 "$HERE/check_ranks_report.py" --label "$label" --report "$OUT/$label.report.json" \
    --dump "$OUT/$label.jsonl" --world "$NGPU" --straggler "$straggler" --nccl --job-rc "$rc" \
    >"$OUT/$label.check.txt" 2>&1
  cat "$OUT/$label.check.txt"
  line=$(tail -1 "$OUT/$label.check.txt")
  rm -f "$OUT/$label.jsonl"
  row "$label" "$([[ $line == *": PASS"* ]] && echo PASS || echo FAIL)" "${line#*: }"
}

# mean_step LOG: the slowest rank's mean_step_ms in a job's output.
mean_step() { awk '/^rank [0-9]+ steps/ { if ($6 > m) m = $6 } END { print m + 0 }' "$1"; }

if want launched; then
  echo "== launched, balanced"
  timeout 150 "$TRACE" -q -o "$OUT/launched.gpuos" -- "${JOB[@]}" --steps 80 --warmup 10 >"$OUT/launched.log" 2>&1
  check launched "$OUT/launched.gpuos" $? none
fi

if want straggler; then
  echo "== launched, rank 1 slowed"
  timeout 150 "$TRACE" -q -o "$OUT/straggler.gpuos" -- "${JOB[@]}" --steps 80 --warmup 10 "${STRAGGLER[@]}" \
    >"$OUT/straggler.log" 2>&1
  check straggler "$OUT/straggler.gpuos" $? 1
fi

if want attached; then
  echo "== attached to torchrun, rank 1 slowed"
  rm -f "$OUT/attach.ready"
  "${JOB[@]}" --steps 700 --warmup 10 "${STRAGGLER[@]}" --ready-file "$OUT/attach.ready" \
    >"$OUT/attached.log" 2>&1 &
  job=$!
  for _ in $(seq 300); do [ -e "$OUT/attach.ready" ] && break; sleep 0.2; done
  sleep 2
  timeout 90 "$TRACE" -q --pid $job --duration 10s -o "$OUT/attached.gpuos" 2>"$OUT/attached.err"
  attach_rc=$?
  timeout 120 tail --pid=$job -f /dev/null
  wait $job
  job_rc=$?
  [ $attach_rc = 0 ] || job_rc=$((1000 + attach_rc))
  check attached "$OUT/attached.gpuos" $job_rc 1
fi

if want imbalance; then
  # A balanced job's ranks side by side: each rank's training-thread CPU
  # time per step untraced and traced, and its syscalls, to tell a rank
  # that is slower by itself from one the tracer slows.
  # GPUOS_IMBALANCE_RECORD: the traced runs' record options, one variant per
  # '|'-separated field (default: one, no options), e.g.
  # "|--no-cuda|--cuda-records kernel" to see which part of the tracer
  # makes one rank late.
  IFS='|' read -r -a record_variants <<<"${GPUOS_IMBALANCE_RECORD:-}"
  [ ${#record_variants[@]} = 0 ] && record_variants=("")
  echo "== balanced job: per-rank loop CPU, untraced and launched"
  for round in 1 2; do
    timeout 150 "${JOB[@]}" --steps 80 --warmup 10 >"$OUT/imbalance_untraced_$round.log" 2>&1
    grep '^rank [0-9]* steps' "$OUT/imbalance_untraced_$round.log" | sed "s/^/untraced $round: /"
    for v in "${!record_variants[@]}"; do
      read -r -a options <<<"${record_variants[$v]}"
      label="launched${options[*]:+ ${options[*]}} $round"
      log="$OUT/imbalance_launched_${v}_$round"
      timeout 150 "$TRACE" -q "${options[@]}" -o "$OUT/imbalance.gpuos" -- "${JOB[@]}" --steps 80 --warmup 10 \
        >"$log.log" 2>&1
      grep '^rank [0-9]* steps' "$log.log" | sed "s/^/$label: /"
      "$TRACE" report "$OUT/imbalance.gpuos" >"$log.report.txt" 2>&1
      sed -n '/^Ranks (/,/^$/p' "$log.report.txt"
      "$TRACE" dump "$OUT/imbalance.gpuos" >"$OUT/imbalance.jsonl" 2>/dev/null
      python3 "$HERE/thread_syscalls.py" "$OUT/imbalance.jsonl" | sed "s/^/$label: /"
      rm -f "$OUT/imbalance.jsonl"
    done
  done 2>&1 | tee "$OUT/imbalance.txt"
  row "balanced ranks (imbalance)" DONE "see imbalance.txt"
fi

if want overhead; then
  echo "== overhead: untraced, launched, --always-on"
  rounds=${GPUOS_NCCL_ROUNDS:-5}
  for round in $(seq "$rounds"); do
    for variant in untraced launched always-on; do
      log="$OUT/overhead_${variant}_$round.log"
      case $variant in
        untraced) timeout 150 "${JOB[@]}" --steps 70 --warmup 10 >"$log" 2>&1 ;;
        launched) timeout 150 "$TRACE" -q -o "$OUT/overhead.gpuos" -- "${JOB[@]}" --steps 70 --warmup 10 >"$log" 2>&1 ;;
        always-on) timeout 150 "$TRACE" -q --always-on -o "$OUT/overhead.gpuos" -- "${JOB[@]}" --steps 70 --warmup 10 \
                     >"$log" 2>&1 ;;
      esac
      rc=$?
      echo "round $round $variant $(mean_step "$log") ms (rc $rc)"
    done
  done | tee "$OUT/overhead.txt"
  rm -f "$OUT/overhead.gpuos"
  table=$(python3 - "$OUT/overhead.txt" <<'PY'
import collections, statistics, sys
ms = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 4 and f[0] == "round" and float(f[3]) > 0:
        ms[f[2]].append(float(f[3]))
base = statistics.median(ms["untraced"]) if ms["untraced"] else 0
parts = []
for v in ("untraced", "launched", "always-on"):
    if not ms[v]:
        parts.append("%s: no runs" % v); continue
    m = statistics.median(ms[v])
    spread = "%.1f-%.1f" % (min(ms[v]), max(ms[v]))
    rel = " %+.1f%%" % (100 * (m / base - 1)) if base and v != "untraced" else ""
    parts.append("%s %.2f ms%s (n=%d, %s)" % (v, m, rel, len(ms[v]), spread))
print("; ".join(parts))
PY
)
  echo "overhead: $table"
  row "overhead (median step)" DONE "$table"
fi

if want exports; then
  echo "== exports in the trace processor"
  tp=()
  for label in launched straggler attached; do
    [ -f "$OUT/$label.gpuos" ] && tp+=(--trace "nccl-$label=$OUT/$label.gpuos")
  done
  timeout 400 python3 "$ROOT/tests/trace_processor/check_exports.py" --tracer "$TRACE" "${tp[@]}" \
    >"$OUT/trace-processor.log" 2>&1
  rc=$?
  grep -E '^[a-z0-9-]+ \((Perfetto|Chrome JSON)\): ' "$OUT/trace-processor.log"
  case $rc in
    0) row "exports in trace processor" PASS "$(tail -1 "$OUT/trace-processor.log")" ;;
    77) row "exports in trace processor" SKIP "$(grep SKIPPED "$OUT/trace-processor.log" | head -1)" ;;
    *) row "exports in trace processor" FAIL "rc=$rc $(tail -1 "$OUT/trace-processor.log")" ;;
  esac
fi

{
  echo "multi-GPU NCCL: $NGPU GPUs, $(head -1 "$OUT/gpu.txt" | sed 's/^ *[0-9]* //'), $(tail -1 "$OUT/gpu.txt"), ${SECONDS} s"
  printf '%s\n' "${ROWS[@]}"
} | tee "$RESULTS_DIR/multi-gpu-table.txt"
if [ -n "${GPU_SESSION_WORK:-}" ]; then
  tar -czf "$RESULTS_DIR/multi-gpu-logs.tgz" -C "$OUT" --exclude='*.gpuos' --exclude='*.pftrace' --exclude='*.jsonl' . 2>/dev/null
fi
