#!/usr/bin/env bash
# A storage-bound DataLoader on the GPU machine (tests/gpu/storage_bound.py:
# every sample an O_DIRECT read, past the page cache): traced, its report
# must name data-loader starvation with storage advice ("Storage sets the
# pace"), not more workers.  PASS/FAIL lines, then the finding.
#   tests/gpu/storage_bound_check.sh BIN_DIR [WORK_DIR]
# STORAGE_BOUND_ARGS: more options for storage_bound.py (e.g. "--iters 20"
# where there is no GPU and the CNN runs on the CPU).
set -uo pipefail
bin=${1:?BIN_DIR}
work=${2:-${TMPDIR:-/var/tmp}/gpuos-storage}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
samples=$work/samples.bin
[ -s "$samples" ] || dd if=/dev/urandom of="$samples" bs=1M count=2048 status=none
"$bin/gpuos-trace" -q -o "$work/storage.gpuos" -- python3 "$here/storage_bound.py" --file "$samples" ${STORAGE_BOUND_ARGS:-} \
  > "$work/job.log" 2> "$work/trace.err"
rc=$?
tail -3 "$work/job.log"
if [ $rc -ne 0 ]; then echo "FAIL storage_bound run: exit $rc: $(tail -2 "$work/trace.err")"; exit 1; fi
"$bin/gpuos-trace" report "$work/storage.gpuos" > "$work/report.txt"
"$bin/gpuos-trace" report "$work/storage.gpuos" --format json > "$work/report.json"
sed -n '/^Diagnosis/,/^$/p' "$work/report.txt"
if grep -q "Storage sets the pace" "$work/report.txt"; then
  echo "PASS storage_bound: storage advice"
else
  echo "FAIL storage_bound: no storage advice"
fi
