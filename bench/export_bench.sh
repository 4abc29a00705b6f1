#!/bin/bash
# Export benchmark: generates a synthetic trace of EVENTS events (default 10
# million) shaped like a training job's, times `gpuos-trace export` on it
# with /usr/bin/time -v (wall time, peak RSS), checks the output against the
# Perfetto trace rules, times Perfetto's trace processor loading it (found
# through GPUOS_TRACE_PROCESSOR or ../shared/tools/perfetto beside the
# repository; left out where absent), and prints the figures for
# docs/export_benchmark.md.
#
#   bench/export_bench.sh [BUILD_DIR] [EVENTS]
#
# The generator/checker (bench/export_bench.cc) is compiled here against the
# build's libraries, so bench/CMakeLists.txt need not know about it.  When
# the gpuos-trace in BUILD_DIR has no `export` command yet, the same exporter
# is timed through `export_bench export` instead, and the output says so.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
EVENTS=${2:-10000000}
WORK=${EXPORT_BENCH_DIR:-$(mktemp -d /tmp/export_bench.XXXXXX)}
mkdir -p "$WORK"

cmake --build "$BUILD" --target gpuos-trace gpuos_export gpuos_analysis gpuos_stream gpuos_proto gpuos_common >/dev/null
GEN="$BUILD/bench/export_bench"
mkdir -p "$BUILD/bench"
# shellcheck disable=SC2046
g++ -O2 -std=c++17 -I "$ROOT/agent" -I "$ROOT/tests" -I "$BUILD/proto" "$ROOT/bench/export_bench.cc" \
  "$ROOT/tests/support/perfetto_trace_check.cc" \
  "$BUILD/agent/export/libgpuos_export.a" "$BUILD/agent/analysis/libgpuos_analysis.a" \
  "$BUILD/agent/stream/libgpuos_stream.a" "$BUILD/proto/libgpuos_proto.a" \
  $(pkg-config --libs protobuf absl_status absl_statusor absl_strings absl_str_format \
      absl_flat_hash_map absl_hash absl_raw_hash_set zlib) -lpthread -o "$GEN"

TRACE="$WORK/bench.gpuos"
if [ ! -s "$TRACE" ]; then
  echo "generating $EVENTS events into $TRACE"
  "$GEN" generate "$TRACE" "$EVENTS"
fi
ls -l "$TRACE"

OUT="$WORK/bench.pftrace"
if "$BUILD/gpuos-trace" --help 2>&1 | grep -q 'export'; then
  CMD=("$BUILD/gpuos-trace" export "$TRACE" -o "$OUT")
else
  echo "note: $BUILD/gpuos-trace has no export command; timing export_bench export (same exporter)"
  CMD=("$GEN" export "$TRACE" "$OUT")
fi
echo "command: ${CMD[*]}"
/usr/bin/time -v "${CMD[@]}" 2> "$WORK/time.txt"
grep -E 'Elapsed \(wall clock\)|Maximum resident set size|User time|System time' "$WORK/time.txt"
ls -l "$OUT"
echo "checking the output"
"$GEN" check "$OUT"

# What the real consumer costs: trace_processor_shell loading the export and
# answering the import-problem and size queries.
TP=${GPUOS_TRACE_PROCESSOR:-$(dirname "$ROOT")/shared/tools/perfetto/trace_processor_shell}
if [ -x "$TP" ]; then
  cat >"$WORK/load.sql" <<'SQL'
select name, idx, severity, value from stats where value > 0;
select (select count(*) from slice) as slices, (select count(*) from flow) as flows,
       (select count(*) from counter) as counter_values, (select count(*) from thread) as threads;
SQL
  echo "loading it in the trace processor: $TP"
  LD_LIBRARY_PATH="$(dirname "$TP")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    /usr/bin/time -v "$TP" -q "$WORK/load.sql" "$OUT" >"$WORK/tp.out" 2>"$WORK/tp_time.txt" ||
    { tail -5 "$WORK/tp_time.txt"; echo "the trace processor failed"; }
  cat "$WORK/tp.out"
  grep -E 'Trace loaded' "$WORK/tp_time.txt" | sed 's/^.*Trace loaded/Trace loaded/' || true
  grep -E 'Elapsed \(wall clock\)|Maximum resident set size|User time|System time' "$WORK/tp_time.txt"
else
  echo "no trace processor at $TP: its load time is left out"
fi

echo
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end"
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/{print $2}') GiB RAM, kernel $(uname -r)"
if [ -z "${EXPORT_BENCH_DIR:-}" ]; then rm -rf "$WORK"; fi
