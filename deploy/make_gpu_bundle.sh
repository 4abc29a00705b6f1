#!/usr/bin/env bash
# Copies what the GPU machine needs from a build here into one folder
# (default build-gpu/, git-ignored) to carry there: the statically linked
# gpuos-trace (stripped), libgpuos_shim.so and the Python hook.  The GPU
# machine has no libbpf, protobuf or Abseil, so nothing is built there but
# CUDA test programs and the LibTorch trainer.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bundle=${2:-build-gpu}
rm -rf "$bundle"
mkdir -p "$bundle"
strip -o "$bundle/gpuos-trace" "$build/gpuos-trace"
strip -o "$bundle/libgpuos_shim.so" "$build/libgpuos_shim.so"
cp -r "$build/python_hooks" "$bundle/"
# The OS-side benchmark's workload and its check for other tracers
# (bench/run_overhead.sh), where built.
for tool in overhead_workload count_bpf_programs empty_syscall_programs minimal_syscall_timer nvtx_mark_cost; do
  if [[ -x $build/bench/$tool ]]; then
    mkdir -p "$bundle/bench"
    strip -o "$bundle/bench/$tool" "$build/bench/$tool"
  fi
done
ldd "$bundle/gpuos-trace" | sed 's/^/  /'
du -sh "$bundle"
