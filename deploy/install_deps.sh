#!/usr/bin/env bash
# Installs, from Debian 12's own repositories, everything gpuos-trace needs to
# build, test and demo (run as root).  Idempotent: installs only what is
# missing.  The CUDA toolkit is not in Debian: when /usr/local/cuda holds it,
# the CUDA shim (NVTX + CUPTI) is built too; without it the tracer still
# records everything on the OS side.  libclang-rt-dev: libFuzzer and the
# sanitizers' runtimes for deploy/fuzz.sh.  python3-dev: the headers the
# Python hook's C extension is built with (agent/python_hooks/gpuos_marks.c).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3 python3-dev chromium
  clang bpftool libbpf-dev libelf-dev zlib1g-dev libzstd-dev
  libprotobuf-dev protobuf-compiler libabsl-dev libgtest-dev
  libclang-rt-dev
)
# LibTorch (CPU) for workloads/gpuos-trainer and PyTorch for the Python
# hook tests and scripts; GPUOS_NO_TORCH=1 skips them.
if [ "${GPUOS_NO_TORCH:-0}" != 1 ]; then
  packages+=(libtorch-dev python3-torch python3-torchvision)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# libbpf attaches tracepoints through tracefs.
if [ ! -d /sys/kernel/tracing/events ] && [ ! -d /sys/kernel/debug/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing || echo "install_deps: warning: could not mount tracefs" >&2
fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then
  echo "install_deps: warning: /sys/kernel/btf/vmlinux is missing: this kernel has no BTF, eBPF recording will not load" >&2
fi
if [ ! -f /usr/local/cuda/include/nvtx3/nvToolsExt.h ]; then
  echo "install_deps: note: no CUDA toolkit in /usr/local/cuda: building without the NVTX/CUDA shim" >&2
fi
