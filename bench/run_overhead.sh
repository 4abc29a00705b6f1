#!/usr/bin/env bash
# Recording-overhead benchmark for gpuos-trace (prints figures; not a test).
#
#   sudo bench/run_overhead.sh [--build-dir DIR] [--pairs N] [--only overhead|diag|ring|memory]
#
# 1. Overhead per traced event: each mode of bench/overhead_workload runs in
#    rounds of three, back to back: untraced (U), traced by gpuos-trace (T),
#    and untraced while a second gpuos-trace records an unrelated `sleep`
#    (B).  Differences are taken within a round, then the median over rounds,
#    so slow drifts of a shared machine cancel out.  Rounds during which
#    someone else's gpuos-trace was loaded are redone.
# 2. Diagnosis: the same with tracer and workload pinned to different CPUs,
#    and the run time of each BPF program per operation (bpf_stats).
# 3. Ring-buffer rate: futex waits that return at once (one record each) at
#    increasing paced rates, then unpaced; drops come from the report.
# 4. Agent memory: one recording of >= 10 million events; gpuos-trace's own
#    peak RSS (VmHWM, polled from /proc) and CPU time.
#
# Latest figures: docs/results.md (every run: docs/archive/benchmarks.md).  Takes about 8 minutes on
# 2 CPUs.  Needs root, jq, bpftool, taskset, and the `bench` target built:
#   cmake --build DIR --target bench
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
PAIRS=7
ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR] [--pairs N] [--only overhead|diag|ring|memory]" >&2; exit 2 ;;
  esac
done

TRACER=$(realpath "$BUILD_DIR/gpuos-trace")
WORKLOAD=$(realpath "$BUILD_DIR/bench/overhead_workload")
for f in "$TRACER" "$WORKLOAD"; do
  [[ -x $f ]] || { echo "run_overhead: $f missing: cmake --build $BUILD_DIR --target bench" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "run_overhead: gpuos-trace needs root: run with sudo" >&2; exit 1; }
# jq reads reports and bpftool's listing (diag, ring, memory); the overhead
# part runs without either (on the GPU machine, which has neither): its
# check for someone else's tracer uses bench/count_bpf_programs.
if [[ $ONLY != overhead ]]; then
  command -v jq >/dev/null || { echo "run_overhead: needs jq (apt-get install jq)" >&2; exit 1; }
fi
COUNT_PROGRAMS=$(dirname "$WORKLOAD")/count_bpf_programs
CAN_SEE_TRACERS=1
[[ -x $COUNT_PROGRAMS ]] || { command -v jq >/dev/null && command -v bpftool >/dev/null; } || CAN_SEE_TRACERS=0

# The OS side alone: no CUDA shim preloaded into the workload, where the
# tracer has one.
TRACE_OPTS=(-q)
[[ $("$TRACER" --help 2>&1) == *--no-cuda* ]] && TRACE_OPTS+=(--no-cuda)

WORK=$(mktemp -d /tmp/gpuos-bench.XXXXXX)
BG_PID=""
cleanup() {
  if [[ -n $BG_PID ]]; then kill -INT "$BG_PID" 2>/dev/null || true; wait "$BG_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# field LINE KEY: the value of KEY=value in a workload's output line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
# median of the numbers on stdin (mean of the middle two for an even count).
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit} m=int((NR+1)/2); print (NR%2 ? v[m] : (v[m]+v[m+1])/2)}'; }
# min and max of the numbers on stdin.
spread() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%s %s\n", lo, hi}'; }
# How many gpuos-trace instances have programs loaded now.  Called only
# while none of ours runs, so any are someone else's (they would tax the
# untraced runs); a just-exited tracer's programs may take a moment to go.
other_tracers() {
  local n
  ((CAN_SEE_TRACERS)) || { echo 0; return; }
  for _ in 1 2 3 4 5; do
    if [[ -x $COUNT_PROGRAMS ]]; then
      n=$("$COUNT_PROGRAMS" handle_sys_enter 2>/dev/null || echo 0)
    else
      n=$(bpftool -j prog show 2>/dev/null | jq '[.[] | select(.name=="handle_sys_enter")] | length' 2>/dev/null || echo 0)
    fi
    [[ $n == 0 ]] && break
    sleep 0.2
  done
  echo "$n"
}
# Waits up to 30 s for other tracers to go; says whether they did.
wait_for_quiet() {
  for _ in $(seq 1 30); do
    [[ $(other_tracers) == 0 ]] && return 0
    sleep 1
  done
  return 1
}
# The ids of the BPF programs that process PID holds open.
prog_ids_of() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^prog_id:/ {print $2}' | sort -un | paste -sd, -; }

run_untraced() { "$WORKLOAD" "$@"; }
run_traced() { "$TRACER" "${TRACE_OPTS[@]}" -o "$WORK/traced.gpuos" -- "$WORKLOAD" "$@"; }
start_background_tracer() {
  "$TRACER" "${TRACE_OPTS[@]}" -o "$WORK/background.gpuos" -- sleep 600 &
  BG_PID=$!
  # `sleep` appears only after the BPF programs are attached and its pid registered.
  for _ in $(seq 1 300); do
    pgrep -x -P "$BG_PID" sleep >/dev/null && return 0
    sleep 0.05
  done
  echo "run_overhead: background gpuos-trace did not start" >&2
  exit 1
}
stop_background_tracer() {
  kill -INT "$BG_PID"
  wait "$BG_PID" || true
  BG_PID=""
}

echo "# gpuos-trace recording overhead, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# host: $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)," \
  "$(systemd-detect-virt 2>/dev/null || echo "virt unknown")), kernel $(uname -r)," \
  "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# NUMA nodes: $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l);" \
  "SMT siblings of CPU 0: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null || echo unknown)"
((CAN_SEE_TRACERS)) || echo "# no count_bpf_programs, jq or bpftool here: rounds are not checked for other tracers"
echo "# tracer: $TRACER ${TRACE_OPTS[*]} ($("$TRACER" --version 2>&1)," \
  "source $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")" \
  "$([[ -n $(git -C "$(dirname "$0")" status --porcelain 2>/dev/null) ]] && echo "+ uncommitted changes"))"
echo

# ---------------------------------------------------------------- overhead
source "$(dirname "$0")/overhead_modes.sh"

# summarize ROWS OFFSET: one table line per mode from columns OFFSET+1..+3
# (U, T, B) of the per-round rows.
summarize() {
  local off=$1 mode rows mu mt added bg lo hi target pass bok
  printf '%-18s %-18s %10s %10s %10s %8s %6s | %10s %17s %6s\n' mode "per" "U ns/op" "T ns/op" \
    "T-U ns" target pass "B-U ns" "U min..max" "B ok"
  for mode in "${MODES[@]}"; do
    rows="$WORK/$mode.rows"
    mu=$(awk -v c=$((off + 1)) '{print $c}' "$rows" | median)
    mt=$(awk -v c=$((off + 2)) '{print $c}' "$rows" | median)
    added=$(awk -v c=$((off + 1)) '{print $(c+1) - $c}' "$rows" | median)
    bg=$(awk -v c=$((off + 1)) '{print $(c+2) - $c}' "$rows" | median)
    read -r lo hi < <(awk -v c=$((off + 1)) '{print $c}' "$rows" | spread)
    target=${MODE_TARGET[$mode]}
    pass=$(awk -v a="$added" -v t="$target" 'BEGIN {print (a <= t ? "PASS" : "FAIL")}')
    # "No measurable change": the median B-U shift is within U's own
    # round-to-round spread.
    bok=$(awk -v d="$bg" -v lo="$lo" -v hi="$hi" 'BEGIN {print (d <= hi - lo ? "yes" : "NO")}')
    printf '%-18s %-18s %10.1f %10.1f %10.1f %8s %6s | %10.1f %8.1f..%-8.1f %6s\n' "$mode" \
      "${MODE_UNIT[$mode]}" "$mu" "$mt" "$added" "<=$target" "$pass" "$bg" "$lo" "$hi" "$bok"
  done
}

if [[ -z $ONLY || $ONLY == overhead ]]; then
  echo "## Overhead per traced event ($PAIRS rounds of untraced U / traced T / untraced-while-tracing B)"
  echo "   (preempt: involuntary context switches of the workload thread during the timed loop;"
  echo "    a round during which someone else's gpuos-trace was loaded is marked 'busy', redone,"
  echo "    and left out of the medians; at most $((2 * PAIRS)) tries per mode)"
  for mode in "${MODES[@]}"; do
    read -r -a args <<<"${MODE_ARGS[$mode]}"
    : >"$WORK/$mode.rows"
    : >"$WORK/$mode.busy"
    clean=0 tries=0
    while ((clean < PAIRS && tries < 2 * PAIRS)); do
      tries=$((tries + 1))
      quiet=clean
      wait_for_quiet || quiet=busy
      u=$(run_untraced "$mode" "${args[@]}")
      t=$(run_traced "$mode" "${args[@]}")
      start_background_tracer
      b=$(run_untraced "$mode" "${args[@]}")
      stop_background_tracer
      [[ $(other_tracers) == 0 ]] || quiet=busy
      # wall ns/op, on-CPU ns/op and preemptions of U, T, B
      row=""
      # (then the CPU each ran on at the end, to see whether placement matters)
      for key in ns_per_op cpu_ns_per_op preemptions cpu; do
        row+="$(field "$u" $key) $(field "$t" $key) $(field "$b" $key) "
      done
      if [[ $quiet == clean ]]; then
        echo "$row" >>"$WORK/$mode.rows"
        clean=$((clean + 1))
      else
        echo "$row" >>"$WORK/$mode.busy"
      fi
      printf '  %-18s try %2d %-5s: wall U %7.0f T %7.0f B %7.0f | cpu U %7.0f T %7.0f B %7.0f ns/op | preempt U %d T %d B %d | on CPU %s %s %s\n' \
        "$mode" "$tries" "$quiet" $row
    done
    if ((clean == 0)); then
      echo "  NOTE: no $mode round ran without another gpuos-trace loaded; its medians use busy rounds"
      cp "$WORK/$mode.busy" "$WORK/$mode.rows"
    elif ((clean < PAIRS)); then
      echo "  NOTE: only $clean clean $mode rounds"
    fi
  done
  echo
  echo "### On-CPU time of the workload thread (CLOCK_THREAD_CPUTIME_ID), median of the clean rounds"
  summarize 3
  echo
  echo "### Wall time (CLOCK_MONOTONIC), median of the clean rounds"
  summarize 0
  echo
fi

# ------------------------------------------------------------- diagnosis
# Where the added time goes, for the explanation in docs/archive/benchmarks.md:
#  - pinned: gpuos-trace on CPU 0, the workload on CPU 1, so the tracer
#    woken by ring-buffer records cannot preempt the workload;
#  - bpf-stats: one traced run per mode with kernel.bpf_stats_enabled=1
#    (restored after), giving each gpuos-trace program's runs per
#    operation and ns per run (stats themselves add ~20-40 ns per run).
OLD_BPF_STATS=""
restore_bpf_stats() { [[ -z $OLD_BPF_STATS ]] || sysctl -q kernel.bpf_stats_enabled="$OLD_BPF_STATS"; }
trap 'restore_bpf_stats; cleanup' EXIT

if [[ -z $ONLY || $ONLY == diag ]]; then
  if (($(nproc) >= 2)); then
    echo "## Diagnosis 1: tracer pinned to CPU 0, workload to CPU 1 (3 rounds, on-CPU ns/op, medians)"
    wait_for_quiet || echo "  NOTE: another gpuos-trace is loaded"
    printf '%-18s %10s %10s %10s %10s %12s\n' mode "U ns/op" "T ns/op" "T-U ns" "wall T-U" "preempt U/T"
    for mode in "${MODES[@]}"; do
      read -r -a args <<<"${MODE_ARGS[$mode]}"
      : >"$WORK/$mode.pinned"
      for round in 1 2 3; do
        u=$(taskset -c 1 "$WORKLOAD" "$mode" "${args[@]}")
        t=$(taskset -c 0 "$TRACER" "${TRACE_OPTS[@]}" -o "$WORK/traced.gpuos" -- taskset -c 1 "$WORKLOAD" "$mode" "${args[@]}")
        echo "$(field "$u" cpu_ns_per_op) $(field "$t" cpu_ns_per_op) $(field "$u" ns_per_op)" \
          "$(field "$t" ns_per_op) $(field "$u" preemptions) $(field "$t" preemptions)" >>"$WORK/$mode.pinned"
      done
      rows="$WORK/$mode.pinned"
      printf '%-18s %10.1f %10.1f %10.1f %10.1f %6s/%-6s\n' "$mode" \
        "$(awk '{print $1}' "$rows" | median)" "$(awk '{print $2}' "$rows" | median)" \
        "$(awk '{print $2 - $1}' "$rows" | median)" "$(awk '{print $4 - $3}' "$rows" | median)" \
        "$(awk '{print $5}' "$rows" | median)" "$(awk '{print $6}' "$rows" | median)"
    done
    echo
  fi

  echo "## Diagnosis 2: BPF program time per operation (kernel.bpf_stats_enabled, one traced run per mode)"
  OLD_BPF_STATS=$(sysctl -n kernel.bpf_stats_enabled)
  sysctl -q kernel.bpf_stats_enabled=1
  for mode in "${MODES[@]}"; do
    wait_for_quiet || echo "  NOTE: another gpuos-trace is loaded"
    read -r -a args <<<"${MODE_ARGS[$mode]}"
    rm -f "$WORK/diag.done"
    # The programs live only as long as the tracer: read them while the
    # traced shell sleeps after the workload.
    "$TRACER" "${TRACE_OPTS[@]}" -o "$WORK/diag.gpuos" -- sh -c \
      "\"$WORKLOAD\" $mode ${args[*]} >\"$WORK/diag.out\"; touch \"$WORK/diag.done\"; sleep 1" &
    tracer_pid=$!
    until [[ -e $WORK/diag.done ]]; do sleep 0.05; done
    ids=$(prog_ids_of "$tracer_pid")
    bpftool -j prog show >"$WORK/progs.json"
    wait "$tracer_pid"
    ops=$(field "$(cat "$WORK/diag.out")" ops)
    echo "### $mode ($ops ops; our programs, run by every process on the machine, not only the workload)"
    jq -r --argjson ops "$ops" --argjson ids "[$ids]" '
      [.[] | select(.id as $id | $ids | index($id)) | select((.run_cnt // 0) > 0)
       | {name, cnt: .run_cnt, ns: .run_time_ns}]
      | group_by(.name) | map({name: .[0].name, cnt: (map(.cnt) | add), ns: (map(.ns) | add)})
      | sort_by(-.ns) as $p
      | ($p[:8][] | "  \(.name | .[0:26] | . + " " * (26 - length)) \(.cnt / $ops * 1000 | round / 1000) runs/op x \(.ns / .cnt | round) ns = \(.ns / $ops | round) ns/op"),
        "  all gpuos-trace programs: \($p | map(.ns) | add / $ops | round) ns/op"' "$WORK/progs.json"
  done
  restore_bpf_stats
  OLD_BPF_STATS=""
  echo
fi

# ------------------------------------------------------------- ring buffer
report_json() { "$TRACER" report "$1" --format json; }

if [[ -z $ONLY || $ONLY == ring ]]; then
  echo "## Ring-buffer rate (futex-wait: 1 record per call; 3 s per step)"
  wait_for_quiet || echo "  NOTE: another gpuos-trace is loaded"
  printf '%-8s %-8s %-14s %14s %14s %12s\n' buffer threads "target rec/s" "recorded" "recorded/s" dropped
  best=0
  # The last step is a control with a tiny buffer: it shows that drops are
  # counted when they happen, so the zeros above it mean something.
  for step in "64M 1 0" "64M 2 100000" "64M 2 200000" "64M 2 400000" "64M 2 800000" "64M 2 0" \
    "64M 4 0" "256K 4 0"; do
    read -r buffer threads rate <<<"$step"
    out=$("$TRACER" "${TRACE_OPTS[@]}" --buffer-size "$buffer" -o "$WORK/traced.gpuos" -- \
      "$WORKLOAD" futex-wait --threads "$threads" --rate "$rate" --seconds 3)
    secs=$(field "$out" seconds)
    json=$(report_json "$WORK/traced.gpuos")
    recorded=$(jq '[.processes[].totals.futex_wait.calls] | add' <<<"$json")
    dropped=$(jq '.dropped_events' <<<"$json")
    per_s=$(awk -v n="$recorded" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
    [[ $buffer == 64M && $dropped == 0 && $per_s -gt $best ]] && best=$per_s
    printf '%-8s %-8s %-14s %14s %14s %12s\n' "$buffer" "$threads" \
      "$([[ $rate == 0 ]] && echo unpaced || echo "$rate")" "$recorded" "$per_s" "$dropped"
  done
  echo "highest futex-wait record rate recorded with zero drops (64M buffer): $best records/s"
  echo
fi

# ------------------------------------------------------------ agent memory
# poll_memory PID: until PID exits, keeps the maxima of its VmHWM, RssAnon,
# RssFile, the Rss of its BPF map mappings and its Pss (smaps, once a
# second) and its utime+stime, in KiB and clock ticks, in HWM ANON FILE
# BPFMAP PSS TICKS.
poll_memory() {
  local pid=$1 n=0 sample ticks h a f b p
  HWM=0 ANON=0 FILE=0 BPFMAP=0 PSS=0 TICKS=0
  while kill -0 "$pid" 2>/dev/null; do
    # One awk per file keeps the poller's own CPU use small.
    sample=$(awk '/^VmHWM:/ {h=$2} /^RssAnon:/ {a=$2} /^RssFile:/ {f=$2}
                  END {if (h != "") print h, a, f}' "/proc/$pid/status" 2>/dev/null || true)
    ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true)
    if [[ -n $sample && -n $ticks ]]; then
      read -r h a f <<<"$sample"
      ((h > HWM)) && HWM=$h
      ((a > ANON)) && ANON=$a
      ((f > FILE)) && FILE=$f
      ((ticks > TICKS)) && TICKS=$ticks
    fi
    if ((n++ % 10 == 0)); then
      b=$(awk '/^[0-9a-f]+-[0-9a-f]+ / {name = $6} /^Rss:/ {if (name ~ /bpf-map/) s += $2}
               END {print s + 0}' "/proc/$pid/smaps" 2>/dev/null || echo 0)
      ((b > BPFMAP)) && BPFMAP=$b
      # Pss counts the ring buffer's double mapping (libbpf maps its data
      # pages twice, for records that wrap) once.
      p=$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)
      ((p > PSS)) && PSS=$p
    fi
    sleep 0.1
  done
}

if [[ -z $ONLY || $ONLY == memory ]]; then
  echo "## Agent memory: an idle recording, then one of >= 10 million events"
  wait_for_quiet || echo "  NOTE: another gpuos-trace is loaded"
  tck=$(getconf CLK_TCK)
  printf '%-34s %10s %8s %9s %10s %9s %9s %12s %11s\n' run events dropped "events/s" "VmHWM MiB" \
    "Pss MiB" "anon MiB" "bpf-map MiB" "agent ns/ev"
  for run in idle busy; do
    if [[ $run == idle ]]; then
      label="sleep 3"
      "$TRACER" "${TRACE_OPTS[@]}" -o "$WORK/memory.gpuos" -- sleep 3 &
    else
      # 2 threads of immediate futex waits, unpaced, until 10.5 M calls (one
      # record each; scheduler and bookkeeping events come on top).
      label="futex-wait x2 threads, 10.5M calls"
      "$TRACER" "${TRACE_OPTS[@]}" -o "$WORK/memory.gpuos" -- "$WORKLOAD" futex-wait --threads 2 --total 10500000 \
        --seconds 300 >"$WORK/memory.out" &
    fi
    tracer_pid=$!
    poll_memory "$tracer_pid"
    wait "$tracer_pid"
    json=$(report_json "$WORK/memory.gpuos")
    events=$(jq '.events' <<<"$json")
    dropped=$(jq '.dropped_events' <<<"$json")
    duration_ns=$(jq '.trace.duration_ns' <<<"$json")
    awk -v l="$label" -v e="$events" -v d="$dropped" -v ns="$duration_ns" -v h="$HWM" -v a="$ANON" \
      -v b="$BPFMAP" -v p="$PSS" -v t="$TICKS" -v tck="$tck" 'BEGIN {
      printf "%-34s %10d %8d %9.0f %10.1f %9.1f %9.1f %12.1f %11.0f\n", l, e, d, e / (ns / 1e9),
        h / 1024, p / 1024, a / 1024, b / 1024, (e ? t / tck * 1e9 / e : 0)
    }'
  done
  size=$(stat -c %s "$WORK/memory.gpuos")
  echo "workload: $(cat "$WORK/memory.out")"
  awk -v e="$events" -v sz="$size" -v h="$HWM" -v a="$ANON" -v b="$BPFMAP" -v p="$PSS" 'BEGIN {
    printf "trace file: %.1f MiB (%.1f bytes/event)\n", sz / 1048576, sz / e
    printf "target >= 10,000,000 events: %s\n", (e >= 10000000 ? "MET" : "NOT MET")
    printf "target peak RSS < 100 MiB: %s (VmHWM %.1f MiB, of which %.1f MiB is the mmap of the BPF ring buffer; VmHWM minus it: %.1f MiB)\n",
      (h < 102400 ? "PASS" : "FAIL"), h / 1024, b / 1024, (h - b) / 1024
    printf "peak Pss (ring buffer counted once): %.1f MiB\n", p / 1024
  }'
fi

echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); took ${SECONDS} s"
