#!/usr/bin/env bash
# A whole GPU-machine session's checks in one call, from the repo root:
#   tests/gpu/gpu_session.sh [BIN_DIR] [PARTS]
# BIN_DIR (default build-gpu) holds what deploy/make_gpu_bundle.sh put there:
# a static gpuos-trace, libgpuos_shim.so and python_hooks/.  PARTS is a
# comma list of: probe, known, known-cupti-clock, known-api-callbacks,
# cuda-records, torch, coexist, overhead, per-kernel-cost, cupti-levers,
# cupti-overhead-records, os-overhead, os-attach-overhead, os-in-job,
# marks-in-job, mark-cost, attach, ranks, trace-processor, suite, corpus, scenarios, capture, capture-rhythm,
# always-on
# (default: all but known-cupti-clock, known-api-callbacks, per-kernel-cost,
# cupti-levers, cupti-overhead-records, os-overhead, os-attach-overhead, os-in-job,
# marks-in-job, mark-cost, trace-processor, suite, corpus, scenarios, capture, capture-rhythm and
# always-on).
# ranks: two_rank_gloo.sh (2 gloo DDP ranks on the GPU, per rank).
# scenarios: the seeds' scenario tables with sweep/compare
# (tests/gpu/scenario_tables.sh; ~6 minutes; tables in scenarios/).
# capture: tests/gpu/capture_check.py (kernels only inside --capture
# windows, exactly kernels per step x window steps; step time outside
# windows vs untraced over GPUOS_CAPTURE_ROUNDS alternating rounds, default
# 5; the overhead table).  always-on:
# bench/always_on_overhead.sh (untraced, --always-on, torch.profiler of the
# same duty cycle, runs of 20 s; GPUOS_ALWAYS_ON_ROUNDS, default 5).
# capture-rhythm: capture_check.py --no-marks (a job with no step marks: the
# shim counts steps from its CUDA calls' rhythm).  Each about 4-7 minutes.
# corpus: tests/corpus/check_corpus.py --profile gpu (the un-annotated
# scripts of workloads/corpus/ and gpuos-trainer, launched, un-annotated
# and attached; one row per run).  GPUOS_CORPUS_ONLY=REGEX picks scripts,
# GPUOS_CORPUS_MODES the modes (e.g. launched,uprobes: attached through
# uprobes only, --no-inject);
# GPUOS_CORPUS_BUDGET_S (default 420) starts no run after that long (the
# rows left say so), so that the part fits one 10-minute call.
# GPUOS_TRAINER=PATH names a gpuos-trainer built against PyTorch's LibTorch
# (else BIN_DIR's, or the one workloads/run_gpu_suite.sh built last; none:
# its rows are skipped); GPUOS_CORPUS_BUILD_TRAINER=1 builds it first
# (workloads/run_gpu_suite.sh, minutes: better in a call of its own).
# Logs go to $OUT (or ./gpu-session-out); the table of results comes last.
# GPU_SESSION_WORK=DIR: work in DIR instead, and leave in $OUT only the
# table (gpu-session-table.txt) and one archive of every log, run file and
# report (gpu-session-logs.tgz; traces and binaries stay behind).  For the
# device tool, which brings back at most 8 files from $OUT: a session
# writes dozens, and run files were lost that way.
set -u
BIN_DIR=${1:-build-gpu}
PARTS=${2:-probe,known,cuda-records,torch,coexist,overhead,attach}
OUT=${OUT:-$PWD/gpu-session-out}
RESULTS_DIR=$OUT
[ -n "${GPU_SESSION_WORK:-}" ] && OUT=$GPU_SESSION_WORK
mkdir -p "$OUT" "$RESULTS_DIR"
export OUT
TRACE="$BIN_DIR/gpuos-trace"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=()
row() { ROWS+=("$(printf '%-34s %-8s %s' "$1" "$2" "$3")"); }
want() { [[ ",$PARTS," == *",$1,"* ]]; }
# check_rows PREFIX LOG NAME: one row per "PASS ..."/"FAIL ..." line of a
# checker's LOG (named PREFIX and the line's start), or one FAIL row NAME
# when it printed none.
check_rows() {
  local prefix=$1 log=$2 name=$3 line
  while IFS= read -r line; do
    case "$line" in
      PASS*|FAIL*) row "$prefix ${line:5:28}" "${line%% *}" "${line:5}" ;;
    esac
  done <"$log"
  grep -q "^FAIL\|^PASS" "$log" || row "$name" FAIL "no result (see $(basename "$log"))"
}
# breakdown_rows WORKLOADS_REGEX LOG...: one DONE row per variant line of
# bench/gpu_overhead_breakdown.sh's summary ("workload variant figures...").
breakdown_rows() {
  local pattern=$1 line
  shift
  while IFS= read -r line; do
    row "$(cut -d' ' -f1-2 <<<"$line")" "DONE" "$(cut -d' ' -f3- <<<"$line")"
  done < <(cat "$@" | grep -E "^($pattern) +[a-z]" | tr -s ' ')
}
SECONDS=0

if want probe; then
  echo "== probe"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
  uname -r | tee -a "$OUT/gpu.txt"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$OUT/gpu.txt"
  [ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
  if "$TRACE" -q -o "$OUT/probe.gpuos" -- ls / >/dev/null 2>"$OUT/probe.stderr"; then
    events=$("$TRACE" report "$OUT/probe.gpuos" --format json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(len(p["threads"]) for p in d["processes"]), "threads,", d["dropped_events"], "dropped")')
    row "eBPF recording loads (ls)" PASS "$events"
  else
    row "eBPF recording loads (ls)" FAIL "$(tail -1 "$OUT/probe.stderr")"
  fi
fi

if want known; then
  echo "== known CUDA work"
  OUT="$OUT/known" timeout 300 bash "$HERE/run_gpu_checks.sh" "$BIN_DIR" 2>&1 | tee "$OUT/known.log" | tail -70
  if grep -q "FAIL" "$OUT/known.log"; then
    row "known CUDA work (run_gpu_checks)" FAIL "$(grep -c FAIL "$OUT/known.log") failing lines, see known.log"
  else
    row "known CUDA work (run_gpu_checks)" PASS "$(grep -c PASS "$OUT/known.log") checks"
  fi
fi

if want known-cupti-clock; then
  # The same checks with records on CUPTI's own clock, mapped onto
  # CLOCK_MONOTONIC by the shim (GPUOS_CUPTI_TIMESTAMPS=cupti).
  echo "== known CUDA work, CUPTI's clock"
  GPUOS_CUPTI_TIMESTAMPS=cupti OUT="$OUT/known-cupti" timeout 300 bash "$HERE/run_gpu_checks.sh" "$BIN_DIR" \
    2>&1 | tee "$OUT/known-cupti.log" | tail -20
  if grep -q "FAIL" "$OUT/known-cupti.log" || ! grep -q "CUPTI's clock" "$OUT/known-cupti/"*report* 2>/dev/null; then
    row "known work, CUPTI clock mapped" FAIL "$(grep -c FAIL "$OUT/known-cupti.log") failing lines, see known-cupti.log"
  else
    row "known work, CUPTI clock mapped" PASS "$(grep -c PASS "$OUT/known-cupti.log") checks"
  fi
fi

if want known-api-callbacks; then
  # The same checks with API calls timed by the shim's CUPTI callbacks
  # (GPUOS_CUPTI_API_TIMING=callback) instead of CUPTI's API records.
  echo "== known CUDA work, API calls timed by callbacks"
  GPUOS_CUPTI_API_TIMING=callback OUT="$OUT/known-callbacks" timeout 300 bash "$HERE/run_gpu_checks.sh" \
    "$BIN_DIR" 2>&1 | tee "$OUT/known-callbacks.log" | tail -20
  if grep -q "FAIL" "$OUT/known-callbacks.log" ||
     ! grep -q "timed by callbacks" "$OUT/known-callbacks/"*report* 2>/dev/null; then
    row "known work, API callbacks" FAIL "$(grep -c FAIL "$OUT/known-callbacks.log") failing lines, see known-callbacks.log"
  else
    row "known work, API callbacks" PASS "$(grep -c PASS "$OUT/known-callbacks.log") checks"
  fi
fi

if want cuda-records; then
  # --cuda-records kernel,memcpy: all kernels and copies of the known work,
  # nothing of the kinds left out, and the status says so.
  echo "== --cuda-records kernel,memcpy"
  known="$OUT/known/cuda_known_work"
  [ -x "$known" ] || { mkdir -p "$OUT/known"; nvcc -O2 -std=c++17 -arch=native -o "$known" "$HERE/cuda_known_work.cu"; }
  timeout 120 "$TRACE" -q --cuda-records kernel,memcpy -o "$OUT/records.gpuos" -- "$known" \
    >"$OUT/records.stdout" 2>"$OUT/records.stderr"
  "$TRACE" dump "$OUT/records.gpuos" >"$OUT/records.jsonl" 2>/dev/null
  python3 "$HERE/check_cuda_records.py" --expect "$OUT/records.stdout" --events "$OUT/records.jsonl" \
    >"$OUT/records.log" 2>&1
  rc=$?
  cat "$OUT/records.log"
  if [ $rc -eq 0 ]; then
    row "--cuda-records kernel,memcpy" PASS "$(grep -c PASS "$OUT/records.log") checks"
  else
    row "--cuda-records kernel,memcpy" FAIL "$(grep FAIL "$OUT/records.log" | head -1)"
  fi
fi

if want torch; then
  echo "== PyTorch steps: gpuos-trace vs torch.profiler"
  timeout 200 "$TRACE" -q -o "$OUT/torch_steps.gpuos" -- python3 "$HERE/torch_step_check.py" train --steps 12 \
    >"$OUT/torch_train.log" 2>&1
  rc=$?
  "$TRACE" dump "$OUT/torch_steps.gpuos" >"$OUT/torch_steps.jsonl" 2>/dev/null
  "$TRACE" report "$OUT/torch_steps.gpuos" >"$OUT/torch_steps_report.txt" 2>&1
  timeout 200 python3 "$HERE/torch_step_check.py" profile --steps 12 >"$OUT/torch_profile.log" 2>&1
  result=$(python3 "$HERE/torch_step_check.py" compare "$OUT/torch_steps.jsonl" "$OUT/torch_profile.log" 2>&1 | tail -1)
  echo "$result"
  workers=$(python3 - "$OUT/torch_steps.jsonl" <<'PY'
import json, sys
procs = set()
for line in open(sys.argv[1]):
    e = json.loads(line).get("event", {})
    if "process_start" in e:
        procs.add(e["pid"])
print(len(procs))
PY
)
  if [ $rc = 0 ] && [[ "$result" == *'"match": true'* ]]; then
    row "torch kernels/step = profiler's" PASS "$result; $workers processes followed"
  else
    row "torch kernels/step = profiler's" FAIL "rc=$rc $result"
  fi
fi

if want coexist; then
  echo "== torch.profiler inside a traced job"
  timeout 120 "$TRACE" -q -o "$OUT/coexist.gpuos" -- python3 "$HERE/profiler_coexist_check.py" \
    >"$OUT/coexist.out" 2>"$OUT/coexist.err"
  rc=$?
  "$TRACE" dump "$OUT/coexist.gpuos" >"$OUT/coexist.jsonl" 2>/dev/null
  result=$(python3 "$HERE/profiler_coexist_check.py" check "$OUT/coexist.jsonl" "$OUT/coexist.out" 2>&1 | tail -1)
  echo "$result"
  if [ $rc = 0 ] && [[ "$result" == *'"ok": true'* ]]; then
    row "torch.profiler works in a traced job" PASS "$result"
  else
    row "torch.profiler works in a traced job" FAIL "rc=$rc $result $(tail -2 "$OUT/coexist.err")"
  fi
fi

if want overhead; then
  echo "== overhead"
  timeout 560 bash "$ROOT/bench/run_gpu_overhead.sh" "$BIN_DIR" "${GPUOS_BENCH_ROUNDS:-3}" 2>&1 | tee "$OUT/overhead.log" | tail -8
  while IFS= read -r line; do
    case "$line" in
      py_launch*|raw_launch*|py_train*) row "overhead ${line%% *}" "$(echo "$line" | grep -q MISSES && echo MISS || echo OK)" "$(echo "$line" | tr -s ' ' | cut -d' ' -f2-)" ;;
    esac
  done <"$OUT/overhead.log"
fi

if want os-overhead; then
  # The OS side's per-event cost (issue #2, point 8) on this machine; needs
  # bench/overhead_workload in BIN_DIR/bench (deploy/make_gpu_bundle.sh).
  echo "== OS-side overhead per event"
  timeout 400 bash "$ROOT/bench/run_overhead.sh" --build-dir "$BIN_DIR" --only overhead \
    --pairs "${GPUOS_OS_BENCH_ROUNDS:-5}" 2>&1 | tee "$OUT/os-overhead.log" | tail -14
  while IFS= read -r line; do
    case "$line" in
      futex-wake*|getppid*|mmap-touch*|page-fault*)
        row "os ${line%% *}" "$(grep -q ' PASS ' <<<"$line" && echo PASS || echo MISS)" "$(tr -s ' ' <<<"${line#* }")" ;;
    esac
  done < <(sed -n '/On-CPU time/,/^$/p' "$OUT/os-overhead.log")
fi

if want os-in-job; then
  # The OS side's cost on the 1 ms MLP inside one job (issue #19): the job
  # in and out of the traced set every 250 ms against a control that
  # records nothing (bench/phase_overhead.py; 4 rounds of 30 s, ~5 minutes).
  echo "== OS side inside one job (toggled every 250 ms)"
  timeout 500 python3 "$ROOT/bench/phase_overhead.py" "$BIN_DIR" --pin "${GPUOS_PHASE_PIN:-4-7}" \
    --rounds "${GPUOS_PHASE_ROUNDS:-4}" --phase-seconds "${GPUOS_PHASE_SECONDS:-30}" --toggle-ms 250 \
    --variants os,os-without:offcpu+faults+syscalls+block_io+torch_uprobes 2>&1 |
    tee "$OUT/os-in-job.log" | tail -4
  while IFS= read -r line; do
    row "os in one job: ${line%% *}" DONE "$(tr -s ' ' <<<"${line#* }")"
  done < <(grep -E "^os(-without\S*)? +[0-9]" "$OUT/os-in-job.log")
  grep -qE "^os +[0-9]" "$OUT/os-in-job.log" || row "os in one job" FAIL "no result (see os-in-job.log)"
fi

if want marks-in-job; then
  # What recording the shim's marks (the step ranges, the Python hook's
  # backward and optimizer.step ranges) costs the 1 ms MLP under
  # --always-on, inside each job: marks off and on every 250 ms, against a
  # control whose marks stay on (bench/phase_overhead.py --marks-toggle-ms;
  # 4 rounds of 30 s jobs, ~6 minutes).  GPUOS_PHASE_TRACER_PIN=CPUS runs
  # the tracer on other CPUs than the job's (GPUOS_PHASE_PIN, default 4-7);
  # GPUOS_MARKS_VARIANTS=always-on leaves the control out (to compare two
  # shims on one host, one session per bundle).
  # What a mark still costs while off is the mark-cost part's.
  echo "== marks inside one job (toggled every 250 ms)"
  timeout 520 python3 "$ROOT/bench/phase_overhead.py" "$BIN_DIR" --pin "${GPUOS_PHASE_PIN:-4-7}" \
    --rounds "${GPUOS_PHASE_ROUNDS:-4}" --phase-seconds "${GPUOS_PHASE_SECONDS:-30}" --marks-toggle-ms 250 \
    ${GPUOS_PHASE_TRACER_PIN:+--tracer-pin "$GPUOS_PHASE_TRACER_PIN"} \
    --variants "${GPUOS_MARKS_VARIANTS:-always-on,control}" 2>&1 | tee "$OUT/marks-in-job.log" | tail -4
  while IFS= read -r line; do
    row "marks in one job: ${line%% *}" DONE "$(tr -s ' ' <<<"${line#* }")"
  done < <(grep -E "^(always-on|control) +[0-9]" "$OUT/marks-in-job.log")
  grep -qE "^always-on +[0-9]" "$OUT/marks-in-job.log" || row "marks in one job" FAIL "no result (see marks-in-job.log)"
fi

if want mark-cost; then
  # What one recorded mark costs its thread: an NVTX push/pop from C and a
  # call through the Python hook, untraced, prepared and recording.
  echo "== one mark's cost"
  bash "$ROOT/bench/mark_cost.sh" "$BIN_DIR" 2>&1 | tee "$OUT/mark-cost.log"
  while IFS= read -r line; do
    row "mark cost: ${line%%:*}" DONE "$(tr -s ' ' <<<"${line#*: }")"
  done < <(grep "^C, " "$OUT/mark-cost.log")
fi

if want per-kernel-cost; then
  # What per-kernel records cost each kernel (issue #3, point 7), split:
  # GPU time of tiny kernels replayed from a CUDA graph (graph_kernels), and
  # the CPU time of one launch call with the launch queue never full
  # (launch_cpu).
  echo "== per-kernel cost: GPU time and CPU time per launch"
  BREAKDOWN_WORKLOADS="graph_kernels launch_cpu" BREAKDOWN_VARIANTS="untraced
cupti-alone:kernel
lite GPUOS_CUPTI_KINDS=kernel,memcpy,memset
all-kinds" timeout 400 bash "$ROOT/bench/gpu_overhead_breakdown.sh" "$BIN_DIR" \
    "${GPUOS_BENCH_ROUNDS:-5}" 2>&1 | tee "$OUT/per-kernel-cost.log" | tail -12
  breakdown_rows 'graph_kernels|launch_cpu' "$OUT/per-kernel-cost.log"
fi

if want cupti-levers; then
  # CUPTI settings against its kernel records' cost (issue #3, point 7):
  # buffers handed over already zero (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
  # the shim's default) and more device buffers allocated
  # up front, under the minimal CUPTI client and under gpuos-trace with the
  # shim's zeroed buffers off and on.
  echo "== CUPTI levers: launch_cpu"
  BREAKDOWN_WORKLOADS="launch_cpu" BREAKDOWN_VARIANTS="untraced
cupti-alone:kernel
cupti-alone:kernel:zeroed CUPTI_FLOOR_ZEROED=1
cupti-alone:kernel:prealloc CUPTI_FLOOR_PREALLOC=8
lite-unzeroed GPUOS_CUPTI_KINDS=kernel,memcpy,memset GPUOS_CUPTI_ZEROED_BUFFERS=0
lite GPUOS_CUPTI_KINDS=kernel,memcpy,memset
all-kinds-unzeroed GPUOS_CUPTI_ZEROED_BUFFERS=0
all-kinds" OUT="$OUT/levers" timeout 200 bash "$ROOT/bench/gpu_overhead_breakdown.sh" "$BIN_DIR" \
    "${GPUOS_LEVER_CPU_ROUNDS:-5}" 2>&1 | tee "$OUT/cupti-levers-launch.log" | tail -12
  cp "$OUT/levers/breakdown_runs.jsonl" "$OUT/cupti-levers-launch-runs.jsonl" 2>/dev/null
  echo "== CUPTI levers: py_train"
  BREAKDOWN_WORKLOADS="py_train" BREAKDOWN_VARIANTS="untraced
cupti-alone:kernel
cupti-alone:kernel:zeroed CUPTI_FLOOR_ZEROED=1
lite-unzeroed GPUOS_CUPTI_KINDS=kernel,memcpy,memset GPUOS_CUPTI_ZEROED_BUFFERS=0
lite GPUOS_CUPTI_KINDS=kernel,memcpy,memset
all-kinds" OUT="$OUT/levers" timeout 330 bash "$ROOT/bench/gpu_overhead_breakdown.sh" "$BIN_DIR" \
    "${GPUOS_BENCH_ROUNDS:-3}" 2>&1 | tee "$OUT/cupti-levers-train.log" | tail -16
  cp "$OUT/levers/breakdown_runs.jsonl" "$OUT/cupti-levers-train-runs.jsonl" 2>/dev/null
  breakdown_rows 'launch_cpu|py_train' "$OUT/cupti-levers-launch.log" "$OUT/cupti-levers-train.log"
fi

if want cupti-overhead-records; then
  # Where CUPTI's own overhead records (CUPTI_ACTIVITY_KIND_OVERHEAD) say
  # its time goes, under the minimal client with kernel records.
  FLOOR="$OUT/libcupti_floor.so"
  bash "$ROOT/bench/build_cupti_floor.sh" "$FLOOR"
  nvcc -O2 -arch=native -o "$OUT/cuda_launch_cpu_cost" "$ROOT/bench/cuda_launch_cpu_cost.cu"
  for workload in launch_cpu py_train; do
    case $workload in
      launch_cpu) cmd=("$OUT/cuda_launch_cpu_cost") ;;
      py_train) cmd=(python3 "$ROOT/bench/gpu_overhead.py" --mode train) ;;
    esac
    echo "== CUPTI's overhead records, $workload"
    CUDA_INJECTION64_PATH="$FLOOR" CUPTI_FLOOR_KINDS=kernel,overhead CUPTI_FLOOR_VERBOSE=1 \
      timeout 60 "${cmd[@]}" 2>&1 | tail -12 | tee "$OUT/cupti-overhead-$workload.log"
  done
fi

if want os-attach-overhead; then
  # The OS side's per-event cost with traced and untraced loops in one
  # process (issue #2, point 8); needs BIN_DIR/bench/overhead_workload.
  echo "== OS-side overhead per event, one process per round"
  timeout 500 bash "$ROOT/bench/attach_overhead.sh" "$BIN_DIR" "${GPUOS_OS_BENCH_ROUNDS:-9}" 2>&1 |
    tee "$OUT/os-attach-overhead.log" | tail -7
  while IFS= read -r line; do
    case "$line" in
      futex-wake*|getppid*|mmap-touch*|page-fault*)
        row "os-attach ${line%% *}" "$(grep -q ' PASS ' <<<"$line" && echo PASS || echo MISS)" "$(tr -s ' ' <<<"${line#* }")" ;;
    esac
  done < <(sed -n '/^medians over rounds/,$p' "$OUT/os-attach-overhead.log")
fi

if want capture; then
  # Issue #19: capture windows on the GPU.
  echo "== capture windows"
  OUT="$OUT/capture" timeout 560 python3 "$HERE/capture_check.py" "$BIN_DIR" --rounds "${GPUOS_CAPTURE_ROUNDS:-5}" 2>&1 |
    tee "$OUT/capture.log" | tail -16
  check_rows capture "$OUT/capture.log" "capture windows"
fi

if want capture-rhythm; then
  # Issue #19: windows in a job that marks no steps, counted by the shim
  # from the rhythm of its CUDA calls (no NVTX, --no-python-hooks).
  echo "== capture windows, steps from the CUDA calls' rhythm"
  # ResNet-18: the small MLP's steps (0.6-1.3 ms) are below the rhythm's
  # 1 ms minimum (the analysis' rule, live_step_rhythm.h).
  OUT="$OUT/capture-rhythm" timeout 560 python3 "$HERE/capture_check.py" "$BIN_DIR" --no-marks \
    --model resnet18 --steps 300 --rounds "${GPUOS_CAPTURE_ROUNDS:-5}" 2>&1 |
    tee "$OUT/capture-rhythm.log" | tail -16
  check_rows rhythm "$OUT/capture-rhythm.log" "capture rhythm"
fi

if want always-on; then
  # Issue #19, point 3: --always-on against untraced and torch.profiler.
  echo "== always-on overhead"
  # One workload per call, runs of 20 s (two of --always-on's 10 s periods
  # after the warm-up) and three variants: that fits one 10-minute call
  # (docs/capture-results.md).  GPUOS_ALWAYS_ON_WORKLOADS=resnet18 in a
  # second call gives the other.
  OUT="$OUT/always-on" ALWAYS_ON_WORKLOADS="${GPUOS_ALWAYS_ON_WORKLOADS:-mlp}" \
    ALWAYS_ON_SECONDS="${ALWAYS_ON_SECONDS:-20}" \
    ALWAYS_ON_VARIANTS="${ALWAYS_ON_VARIANTS:-untraced always-on profiler}" \
    timeout 560 bash "$ROOT/bench/always_on_overhead.sh" "$BIN_DIR" \
    "${GPUOS_ALWAYS_ON_ROUNDS:-5}" 2>&1 | tee "$OUT/always-on.log" | tail -12
  while IFS= read -r line; do
    case "$line" in
      mlp\ *|resnet18\ *) row "always-on $(tr -s ' ' <<<"$line" | cut -d' ' -f1-2)" DONE "$(tr -s ' ' <<<"$line" | cut -d' ' -f3-)" ;;
    esac
  done <"$OUT/always-on.log"
fi

if want attach; then
  echo "== attach to a running PyTorch job (issue #6)"
  # A launched trace of the same job, for its kernels per step.
  timeout 120 "$TRACE" -q -o "$OUT/attach_launched.gpuos" -- python3 "$HERE/attach_train.py" \
    --seconds 8 --log "$OUT/attach_launched.steps" >/dev/null 2>"$OUT/attach_launched.err"
  "$TRACE" dump "$OUT/attach_launched.gpuos" >"$OUT/attach_launched.jsonl" 2>/dev/null
  launched=$(python3 "$HERE/attach_check.py" launched "$OUT/attach_launched.jsonl" "$OUT/attach_launched.steps" 2>&1 | tail -1)
  echo "launched: $launched"
  row "attach: launched trace (reference)" "$([[ $launched == *kernels_per_step* ]] && echo DONE || echo FAIL)" "$launched"
  # mode name, extra gpuos-trace options, how the job is started.
  for variant in "injected::" "uprobes:--no-inject:" "prepared::--prepare" "gpu-procs:--gpu-procs:"; do
    IFS=: read -r name opts prep <<<"$variant"
    log="$OUT/attach_$name.steps"
    if [ -n "$prep" ]; then
      "$TRACE" --prepare -- python3 "$HERE/attach_train.py" --seconds 24 --log "$log" >"$OUT/attach_$name.job" 2>&1 &
    else
      python3 "$HERE/attach_train.py" --seconds 24 --log "$log" >"$OUT/attach_$name.job" 2>&1 &
    fi
    job=$!
    for _ in $(seq 100); do grep -q ready "$OUT/attach_$name.job" 2>/dev/null && break; sleep 0.2; done
    sleep 5  # the job's speed before
    target="--pid $job"
    [ "$name" = gpu-procs ] && target=""  # every process holding a GPU context: the job
    timeout 60 "$TRACE" $opts $target --duration 8s -o "$OUT/attach_$name.gpuos" 2>"$OUT/attach_$name.err"
    rc=$?
    wait $job
    jrc=$?
    "$TRACE" dump "$OUT/attach_$name.gpuos" >"$OUT/attach_$name.jsonl" 2>/dev/null
    "$TRACE" report "$OUT/attach_$name.gpuos" >"$OUT/attach_${name}_report.txt" 2>&1
    result=$(python3 "$HERE/attach_check.py" window "$OUT/attach_$name.jsonl" "$log" 2>&1 | tail -1)
    echo "$name: rc=$rc job=$jrc $result"
    row "attach $name" "$([ $rc = 0 ] && [ $jrc = 0 ] && echo DONE || echo FAIL)" "$result"
  done
fi

if want trace-processor; then
  # Issue #18: the traces of the seeds' ResNet-18 sequence (baseline,
  # workers, pinned, prefetch) and of an attached PyTorch job, exported and
  # loaded in Perfetto's trace processor (GPUOS_TRACE_PROCESSOR: the
  # trace_processor_shell carried here, libprotobuf.so.32 beside it), held
  # to the report's counts by the CI's checks (tests/trace_processor/), with
  # the stats, counts and the user queries of docs/trace-processor.md.
  echo "== trace processor"
  tp_traces=()
  for variant in baseline workers pinned prefetch; do
    steps=(--steps 30 --warmup 5)
    [ $variant = baseline ] && steps=(--steps 12 --warmup 2)
    timeout 300 "$TRACE" -q -o "$OUT/tp_resnet_$variant.gpuos" -- python3 \
      "$ROOT/workloads/python/resnet_data_pipeline.py" --device cuda --variant $variant "${steps[@]}" \
      >"$OUT/tp_resnet_$variant.log" 2>&1 || echo "resnet $variant: rc=$? (see tp_resnet_$variant.log)"
    tp_traces+=(--trace "resnet-$variant=$OUT/tp_resnet_$variant.gpuos")
  done
  python3 "$HERE/attach_train.py" --seconds 20 --log "$OUT/tp_attach.steps" >"$OUT/tp_attach.job" 2>&1 &
  job=$!
  for _ in $(seq 100); do grep -q ready "$OUT/tp_attach.job" 2>/dev/null && break; sleep 0.2; done
  sleep 2
  timeout 60 "$TRACE" --pid $job --duration 8s -o "$OUT/tp_attach.gpuos" 2>"$OUT/tp_attach.err" ||
    echo "attach: rc=$? (see tp_attach.err)"
  wait $job
  tp_traces+=(--trace "attach-injected=$OUT/tp_attach.gpuos")
  # check_exports.py runs the trace processor with LD_LIBRARY_PATH set to
  # its folder (not set here: the later parts' Python would see it too).
  timeout 900 python3 "$ROOT/tests/trace_processor/check_exports.py" --tracer "$TRACE" "${tp_traces[@]}" \
    >"$OUT/trace-processor.log" 2>&1
  rc=$?
  cat "$OUT/trace-processor.log"
  while IFS= read -r line; do
    label=${line%%:*}
    row "tp ${label}" "$([[ $line == *": ok" ]] && echo PASS || echo FAIL)" \
      "$(sed -E 's/^[^:]*: //; s/, loaded and queried in [0-9.]+ s//; s/; stats: .*//' <<<"$line")"
  done < <(grep -E '^[a-z0-9-]+ \((Perfetto|Chrome JSON)\): ' "$OUT/trace-processor.log")
  case $rc in
    0) row "trace processor: every export" PASS "$(tail -1 "$OUT/trace-processor.log")" ;;
    77) row "trace processor: every export" SKIP "$(grep SKIPPED "$OUT/trace-processor.log" | head -1)" ;;
    *) row "trace processor: every export" FAIL "rc=$rc $(tail -1 "$OUT/trace-processor.log")" ;;
  esac
fi

if want suite; then
  echo "== workload suite"
  timeout 560 bash "$ROOT/workloads/run_gpu_suite.sh" "$BIN_DIR" 2>&1 | tee "$OUT/suite.log" | tail -40
  row "workload suite" "$([ ${PIPESTATUS[0]} = 0 ] && echo DONE || echo FAIL)" "see suite.log"
fi

if want corpus; then
  echo "== corpus: un-annotated training scripts, launched and attached (issue 17)"
  if [ "${GPUOS_CORPUS_BUILD_TRAINER:-0}" = 1 ] && [ -z "${GPUOS_TRAINER:-}" ]; then
    OUT="$OUT/corpus-build" timeout 420 bash "$ROOT/workloads/run_gpu_suite.sh" --only '^$' "$BIN_DIR" \
      >"$OUT/corpus-build.log" 2>&1
  fi
  trainer=${GPUOS_TRAINER:-}
  for candidate in "$BIN_DIR/gpuos-trainer" "${GPUOS_SUITE_BUILD_DIR:-${TMPDIR:-/tmp}/gpuos-workloads-build}/gpuos-trainer"; do
    if [ -z "$trainer" ] && [ -x "$candidate" ]; then trainer=$candidate; fi
  done
  budget=${GPUOS_CORPUS_BUDGET_S:-420}
  timeout $((budget + 120)) python3 "$ROOT/tests/corpus/check_corpus.py" --trace "$TRACE" --python python3 \
    ${trainer:+--trainer "$trainer"} --profile gpu --budget "$budget" ${GPUOS_CORPUS_ONLY:+--only "$GPUOS_CORPUS_ONLY"} \
    ${GPUOS_CORPUS_MODES:+--modes "$GPUOS_CORPUS_MODES"} \
    --work "$OUT/corpus" --json "$OUT/corpus.json" >"$OUT/corpus.txt" 2>"$OUT/corpus.log"
  echo "exit status $?" >>"$OUT/corpus.log"
  cat "$OUT/corpus.txt"
  # One session row per corpus row.
  while IFS=$'\t' read -r name result detail; do
    row "$name" "$result" "$detail"
  done < <(python3 - "$OUT/corpus.json" <<'PY' 2>/dev/null
import json, sys
for r in json.load(open(sys.argv[1])):
    result = "SKIP" if r["skipped"] else ("PASS" if r["passed"] else "FAIL")
    mean, own = r["mean_step_ms"], r["own_iter_ms"]
    vs = "%+.1f%%" % (100 * (mean / own - 1)) if mean and own else "-"
    detail = "%s steps (%s), mean %s ms vs own %s (%s), %s" % (
        r["measured_steps"], r["source"], "%.3f" % mean if mean else "-", "%.3f" % own if own else "-",
        vs, r["diagnosis"])
    if r["skipped"]:
        detail = r["skipped"]
    elif r["failures"]:
        detail += "; failed: " + ",".join(dict.fromkeys(f.split(":")[0] for f in r["failures"]))
    print("corpus %s %s\t%s\t%s" % (r["script"], r["mode"], result, detail))
PY
)
  [ -s "$OUT/corpus.json" ] || row "corpus" FAIL "no results: $(tail -2 "$OUT/corpus.log" | tr '\n' ' ')"
fi

if want scenarios; then
  echo "== scenario tables (sweep / compare)"
  OUT="$OUT" timeout 540 bash "$HERE/scenario_tables.sh" "$BIN_DIR" 2>&1 | tee "$OUT/scenarios.log"
  tables=$(grep -c '^## ' "$OUT/scenarios/scenario-tables.md" 2>/dev/null)
  if grep -q "^-- .*: exit 0 in" "$OUT/scenarios.log" && ! grep -q "^-- .*: exit [1-9]" "$OUT/scenarios.log"; then
    row "scenario tables" DONE "${tables:-0} tables in scenarios/scenario-tables.md"
  else
    row "scenario tables" FAIL "$(grep -c '^-- .*: exit [1-9]' "$OUT/scenarios.log") sweeps failed, see scenarios.log"
  fi
fi

if want ranks; then
  echo "== two DDP ranks (gloo) sharing the GPU"
  result=$(bash "$HERE/two_rank_gloo.sh" "$BIN_DIR" 2>&1 | tee "$OUT/ranks.log" | tail -1)
  echo "$result"
  case "$result" in
    "two-rank gloo: PASS"*) row "ranks: 2 gloo ranks, one GPU" PASS "${result#two-rank gloo: PASS }" ;;
    *) row "ranks: 2 gloo ranks, one GPU" FAIL "${result#two-rank gloo: }" ;;
  esac
fi

print_table() {
  echo "gpuos-trace GPU session: $(head -1 "$OUT/gpu.txt" 2>/dev/null), $(date -u +%FT%TZ), ${SECONDS}s"
  printf '%-34s %-8s %s\n' "check" "result" "detail"
  for r in "${ROWS[@]}"; do echo "$r"; done
}
if [ "$OUT" != "$RESULTS_DIR" ]; then
  print_table >"$RESULTS_DIR/gpu-session-table.txt"
  (cd "$OUT" && find . -type f \( -name '*.log' -o -name '*.jsonl' -o -name '*.json' -o -name '*.txt' \
     -o -name '*.err' -o -name '*.stderr' -o -name '*.out' -o -name '*.md' \) -size -64M -print0 |
     tar czf "$RESULTS_DIR/gpu-session-logs.tgz" --null -T -)
fi
echo
print_table
