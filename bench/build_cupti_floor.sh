#!/usr/bin/env bash
# Builds the minimal CUPTI client (bench/cupti_floor_injection.cc, "CUPTI
# alone") into LIBRARY, on the GPU machine: the one build line of every
# script that runs it.
#   bench/build_cupti_floor.sh LIBRARY
set -u
[ $# -eq 1 ] || { echo "usage: build_cupti_floor.sh LIBRARY" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
exec g++ -O2 -shared -fPIC -o "$1" "$HERE/cupti_floor_injection.cc" \
  -I"$CUDA_HOME/extras/CUPTI/include" -I"$CUDA_HOME/include" -L"$CUDA_HOME/extras/CUPTI/lib64" \
  -L"$CUDA_HOME/lib64" -lcupti -lpthread -Wl,-rpath,"$CUDA_HOME/lib64"
