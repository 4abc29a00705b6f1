#!/usr/bin/env bash
# What a recorded mark costs the thread that makes it, untraced, with the
# shim loaded but idle (--prepare), recording (gpuos-trace -- ...) and
# recording with capture windows (--always-on; marks drive them): an
# NVTX push/pop pair from C (bench/nvtx_mark_cost.cc) and a call through
# the Python hook's wrappers (bench/python_hook_cost.py).
#   bench/mark_cost.sh [BIN_DIR]    (BIN_DIR: gpuos-trace, libgpuos_shim.so,
#                                    bench/nvtx_mark_cost; default build)
set -u
BIN_DIR=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
TRACE="$BIN_DIR/gpuos-trace"
TOOL="$BIN_DIR/bench/nvtx_mark_cost"
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/gpuos-mark-cost.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[[ -x $TOOL ]] || { echo "mark_cost.sh: $TOOL not built" >&2; exit 2; }
echo "C, untraced:  $("$TOOL")"
echo "C, prepared:  $("$TRACE" --prepare -- "$TOOL")"
echo "C, recording: $("$TRACE" -q -o "$WORK/c.gpuos" -- "$TOOL")"
echo "C, always-on: $("$TRACE" -q --always-on -o "$WORK/c.gpuos" -- "$TOOL")"
echo "Python hook, prepared:"
"$TRACE" --prepare -- "$PY" "$HERE/python_hook_cost.py" | sed 's/^/  /'
echo "Python hook, recording (--always-on):"
"$TRACE" -q --always-on -o "$WORK/py.gpuos" -- "$PY" "$HERE/python_hook_cost.py" --calls 20000 | sed 's/^/  /'
