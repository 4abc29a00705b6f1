#!/usr/bin/env bash
# What --always-on costs (issue #19, point 3), side by side in one run on the
# GPU machine: rounds of [untraced, gpuos-trace --no-cuda ("os-only"),
# gpuos-trace --always-on, the same with our API timing callbacks kept on
# outside windows ("always-on-callbacks": GPUOS_CAPTURE_API_CALLBACKS=always),
# torch.profiler with a schedule of the same duty cycle (one recorded step
# in the steps of one period)] in rotating order, on the small MLP loop and on ResNet-18 steps
# (bench/capture_workload.py), then per workload the median step rate of
# each variant and its loss against untraced.  Also selectable: gpuos-trace
# with no options ("default") and --always-on with CUPTI finalized between
# windows ("always-on-finalize").  Target: --always-on within 1% of
# untraced, and below torch.profiler.
#   bench/always_on_overhead.sh [BIN_DIR] [ROUNDS]
# BIN_DIR holds gpuos-trace and libgpuos_shim.so (default build-gpu); ROUNDS
# at least 5 (default 5).  ALWAYS_ON_WORKLOADS="mlp resnet18" picks
# workloads; ALWAYS_ON_SECONDS=S runs each S seconds after its warmup
# (several of --always-on's 10 s periods: 25 or more) instead of 1000 MLP or
# 80 ResNet-18 steps; ALWAYS_ON_SPEC overrides the capture spec (e.g. every=50,steps=1)
# to measure another duty cycle (the profiler's follows it);
# GPUOS_CAPTURE_API_RECORDS=always in the environment keeps CUDA API records
# outside windows too (the shim's default drops them there), to see what
# they cost.  always-on-finalize runs with GPUOS_CAPTURE_FINALIZE_GAP=1
# (CUPTI taken out of the process at every gap between windows, and
# subscribed again at the next one); ALWAYS_ON_FINALIZE_GAP overrides it
# (e.g. 10s).  The shim times API calls by callbacks only with
# GPUOS_CUPTI_API_TIMING=callback in the environment (else by CUPTI's
# records, and always-on and always-on-callbacks run the same shim):
# set it to see what switching those callbacks off between windows saves.
# always-on-subscribed runs --always-on with GPUOS_CAPTURE_FINALIZE_GAP=off
# (CUPTI stays subscribed between windows, its device kinds off).
# ALWAYS_ON_PIN=CPULIST runs every variant's job under taskset -c CPULIST
# (the same cores each run: a process's placement is one source of the
# spread between runs).
# os-without:NAMES is os-only with the BPF sources or programs NAMES
# ('+' between them: offcpu, faults, syscalls, block_io, torch_uprobes,
# handle_irq_entry...) left unattached (GPUOS_BENCH_DETACH), to split the OS
# side's cost, e.g. ALWAYS_ON_VARIANTS="untraced os-only os-without:torch_uprobes
# os-without:offcpu os-without:syscalls+faults".
# ALWAYS_ON_VARIANTS picks variants (default "untraced os-only always-on
# always-on-subscribed profiler", which fits one 10-minute call).
set -u
BIN_DIR=${1:-build-gpu}
ROUNDS=${2:-5}
OUT=${OUT:-$(mktemp -d /tmp/gpuos-always-on.XXXXXX)}
mkdir -p "$OUT"
TRACE="$BIN_DIR/gpuos-trace"
HERE=$(cd "$(dirname "$0")" && pwd)
WORKLOAD="$HERE/capture_workload.py"
RESULTS="$OUT/always_on_runs.jsonl"
SPEC=${ALWAYS_ON_SPEC:-}
PRESET="every=10s,steps=2"  # --always-on (cupti_shim/capture_spec.h, kAlwaysOnSpec)
# The profiler's schedule has the same duty cycle: one active step in every
# N steps, or in the steps of every=DURATION.
EVERY=$(sed -n 's/.*every=\([0-9a-z.]*\).*/\1/p' <<<"${SPEC:-$PRESET}")
if [[ $EVERY =~ ^[0-9]+$ ]]; then
  PROFILE=(--profile-every "$EVERY")
else
  PROFILE=(--profile-seconds "$(python3 -c '
import re, sys
n, unit = re.fullmatch(r"(\d+)(ns|us|ms|s|m|h)", sys.argv[1]).groups()
print(int(n) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[unit])' "$EVERY")")
fi
: >"$RESULTS"

# ALWAYS_ON_SECONDS=S: each run S seconds after its warmup (several periods
# of a time-based spec), else a fixed number of steps.
length_for() {
  if [ -n "${ALWAYS_ON_SECONDS:-}" ]; then echo --seconds "$ALWAYS_ON_SECONDS"
  elif [ "$1" = mlp ]; then echo --steps 1000
  else echo --steps 80; fi
}

run() {  # run VARIANT WORKLOAD
  local variant=$1 workload=$2 line
  local cmd=(python3 "$WORKLOAD" --model "$workload" $(length_for "$workload"))
  [ -n "${ALWAYS_ON_PIN:-}" ] && cmd=(taskset -c "$ALWAYS_ON_PIN" "${cmd[@]}")
  case $variant in
    untraced) line=$("${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
    default) line=$("$TRACE" -q -o "$OUT/$workload.default.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
    always-on)
      if [ -n "$SPEC" ]; then
        line=$("$TRACE" -q --capture "$SPEC" -o "$OUT/$workload.always.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1)
      else
        line=$("$TRACE" -q --always-on -o "$OUT/$workload.always.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1)
      fi ;;
    always-on-callbacks)
      local capture=(--always-on)
      [ -n "$SPEC" ] && capture=(--capture "$SPEC")
      line=$(GPUOS_CAPTURE_API_CALLBACKS=always "$TRACE" -q "${capture[@]}" \
        -o "$OUT/$workload.callbacks.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
    # CUPTI left subscribed between windows, device kinds off (no finalize):
    # what --always-on did before it took CUPTI out at far gaps.
    always-on-subscribed)
      local capture=(--always-on)
      [ -n "$SPEC" ] && capture=(--capture "$SPEC")
      line=$(GPUOS_CAPTURE_FINALIZE_GAP=off "$TRACE" -q "${capture[@]}" \
        -o "$OUT/$workload.subscribed.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
    always-on-finalize)
      local capture=(--always-on)
      [ -n "$SPEC" ] && capture=(--capture "$SPEC")
      line=$(GPUOS_CAPTURE_FINALIZE_GAP="${ALWAYS_ON_FINALIZE_GAP:-1}" "$TRACE" -q "${capture[@]}" \
        -o "$OUT/$workload.finalize.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
    # The OS side alone: the floor every capture mode sits on.
    os-only) line=$("$TRACE" -q --no-cuda -o "$OUT/$workload.os.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
    # The OS side with parts left unattached (GPUOS_BENCH_DETACH; '+' between
    # names): what each part of os-only costs.
    os-without:*)
      line=$(GPUOS_BENCH_DETACH="$(tr + , <<<"${variant#os-without:}")" "$TRACE" -q --no-cuda \
        -o "$OUT/$workload.os-part.gpuos" -- "${cmd[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
    profiler) line=$("${cmd[@]}" "${PROFILE[@]}" 2>>"$OUT/stderr.log" | tail -1) ;;
  esac
  case $line in
    "{"*) ;;
    *) line=null ;;
  esac
  echo "{\"variant\": \"$variant\", \"workload\": \"$workload\", \"result\": $line}" >>"$RESULTS"
}

read -r -a VARIANTS <<<"${ALWAYS_ON_VARIANTS:-untraced os-only always-on always-on-subscribed profiler}"
for round in $(seq "$ROUNDS"); do
  shift_by=$(( (round - 1) % ${#VARIANTS[@]} ))
  for workload in ${ALWAYS_ON_WORKLOADS:-mlp resnet18}; do
    for variant in "${VARIANTS[@]:$shift_by}" "${VARIANTS[@]:0:$shift_by}"; do
      run "$variant" "$workload"
    done
  done
done

python3 - "$RESULTS" "${SPEC:-$PRESET (--always-on)}; runs ${ALWAYS_ON_SECONDS:-of fixed steps}${ALWAYS_ON_SECONDS:+ s}${ALWAYS_ON_PIN:+; jobs pinned to CPUs $ALWAYS_ON_PIN}" "${ALWAYS_ON_FINALIZE_GAP:-1}" \
  "${GPUOS_CUPTI_API_TIMING:-records}" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# Every variant that ran, in the order first run (the table must not drop one).
present = list(dict.fromkeys(r["variant"] for r in runs))
workloads = {r["workload"] for r in runs}
rounds = max(1, len(runs) // max(1, len(present) * len(workloads)))
print("always-on overhead: medians of step rate over %d rounds; capture %s; always-on-finalize: "
      "GPUOS_CAPTURE_FINALIZE_GAP=%s; API timing: %s; profiler schedule wait/warmup/active of the "
      "same cycle" % (rounds, sys.argv[2], sys.argv[3], sys.argv[4]))
# "paired": each round's loss against the same round's untraced run, then
# the median: the host's drift between rounds (+-15% here) cancels out.
print("%-9s %-32s %10s %8s %-17s %4s %8s %s" % ("workload", "variant", "steps/s", "loss", "loss min..max", "runs",
                                                "paired", "paired min..max"))
for workload in sorted({r["workload"] for r in runs}):
    rates = {}
    for r in runs:
        if r["workload"] == workload and r["result"]:
            rates.setdefault(r["variant"], []).append(r["result"]["steps_per_s"])
    base = statistics.median(rates["untraced"]) if rates.get("untraced") else None
    for variant in present:
        got = rates.get(variant, [])
        if not got:
            print("%-9s %-32s %10s %8s 0 (failed: see stderr.log)" % (workload, variant, "-", "-"))
            continue
        median = statistics.median(got)
        loss = "%+.1f%%" % (100 * (1 - median / base)) if base else "-"
        spread = "%+.1f..%+.1f%%" % (100 * (1 - max(got) / base), 100 * (1 - min(got) / base)) if base else "-"
        # The i-th run of a variant ran in round i, as did the i-th untraced.
        pairs = [100 * (1 - v / u) for v, u in zip(got, rates.get("untraced", []))]
        paired = "%+.1f%%" % statistics.median(pairs) if pairs else "-"
        paired_spread = "%+.1f..%+.1f%%" % (min(pairs), max(pairs)) if pairs else "-"
        print("%-9s %-32s %10.1f %8s %-17s %4d %8s %s" % (workload, variant, median, loss, spread, len(got),
                                                         paired, paired_spread))
PY
