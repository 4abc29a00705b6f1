#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a traced demo: installs what
# is missing, builds, records the built-in demo workload (the LibTorch trainer
# on the CPU with DataLoader-style worker processes, or, without LibTorch, the
# ground-truth workload) under gpuos-trace, and prints the report.
#   sudo bash deploy/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "demo.sh: run it as root (sudo bash deploy/demo.sh)" >&2; exit 1; fi
bash deploy/install_deps.sh
bash deploy/build.sh
build_dir=${GPUOS_BUILD_DIR:-build}
trace=${GPUOS_DEMO_TRACE:-$PWD/demo.gpuos}
if [ -x "$build_dir/gpuos-trainer" ]; then
  demo=("$build_dir/gpuos-trainer" --device cpu --model mlp --steps 40 --warmup 5 --batch-size 64 --workers 2)
else
  demo=("$build_dir/tests/workloads/ground_truth" --threads 2 --workers 2)
fi
echo "demo.sh: recording: ${demo[*]}"
"$build_dir/gpuos-trace" -o "$trace" -- "${demo[@]}"
"$build_dir/gpuos-trace" report "$trace" --warmup-steps 5
echo
echo "demo.sh: the trace is $trace"
echo "demo.sh: JSON report: $build_dir/gpuos-trace report $trace --format json"
