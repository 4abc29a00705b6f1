#!/bin/bash
# Merge benchmark: writes two synthetic hosts' traces of EVENTS events each
# (default 10 million; bench/merge_trace_gen.cc, the real TraceWriter), the
# second host's clock SHIFT ns ahead, times `gpuos-trace merge` on them with
# /usr/bin/time -v (wall time, peak RSS) and checks the skew it found.
# Target (issue 23): under 30 s and 1 GiB.
#
#   bench/merge_bench.sh [BUILD_DIR] [EVENTS]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
EVENTS=${2:-10000000}
SHIFT=7123456789
WORK=${MERGE_BENCH_DIR:-$(mktemp -d /tmp/merge_bench.XXXXXX)}
mkdir -p "$WORK"

cmake --build "$BUILD" --target gpuos-trace gpuos_stream gpuos_proto >/dev/null
GEN="$BUILD/bench/merge_trace_gen"
mkdir -p "$BUILD/bench"
# shellcheck disable=SC2046
g++ -O2 -std=c++17 -I "$ROOT/agent" -I "$BUILD/proto" "$ROOT/bench/merge_trace_gen.cc" \
  "$BUILD/agent/stream/libgpuos_stream.a" "$BUILD/proto/libgpuos_proto.a" \
  $(pkg-config --libs protobuf absl_status absl_statusor absl_strings absl_str_format zlib) \
  -lpthread -o "$GEN"

[ -s "$WORK/a.gpuos" ] || "$GEN" "$WORK/a.gpuos" "$EVENTS" host-a 0 1
[ -s "$WORK/b.gpuos" ] || "$GEN" "$WORK/b.gpuos" "$EVENTS" host-b "$SHIFT" 2
ls -l "$WORK/a.gpuos" "$WORK/b.gpuos"

/usr/bin/time -v "$BUILD/gpuos-trace" merge "$WORK/a.gpuos" "$WORK/b.gpuos" -o "$WORK/job.gpuos" \
  2> "$WORK/time.txt"
grep -E '^gpuos-trace:' "$WORK/time.txt"
grep -E 'Elapsed \(wall clock\)|Maximum resident set size|User time|System time' "$WORK/time.txt"
ls -l "$WORK/job.gpuos"
echo "expected skew of host-b: -$SHIFT ns (its clock is $SHIFT ns ahead)"

echo
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end"
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/{print $2}') GiB RAM, kernel $(uname -r)"
if [ -z "${MERGE_BENCH_DIR:-}" ]; then rm -rf "$WORK"; fi
