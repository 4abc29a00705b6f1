#!/usr/bin/env bash
# Configures and builds gpuos-trace (and, with LibTorch present, the trainer)
# into ${GPUOS_BUILD_DIR:-build}.  Used by demo.sh, test.sh and the GPU suite.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${GPUOS_BUILD_DIR:-build}
jobs=${GPUOS_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
