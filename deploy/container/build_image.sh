#!/usr/bin/env bash
# Builds the gpuos-trace image from a build tree:
#   deploy/container/build_image.sh [BUILD_DIR] [IMAGE] [BASE]
# BUILD_DIR default build/, IMAGE default gpuos-trace:latest, BASE default
# debian:12 (give a local image, e.g. one made by debootstrap + podman import,
# where no registry can be reached).  Uses podman, else docker.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
IMAGE=${2:-gpuos-trace:latest}
BASE=${3:-debian:12}
ENGINE=$(command -v podman || command -v docker || true)
[[ -n $ENGINE ]] || { echo "build_image.sh: neither podman nor docker is installed" >&2; exit 2; }
CONTEXT=$(mktemp -d /tmp/gpuos-image.XXXXXX)
trap 'rm -rf "$CONTEXT"' EXIT
strip -o "$CONTEXT/gpuos-trace" "$BUILD/gpuos-trace"
strip -o "$CONTEXT/libgpuos_shim.so" "$BUILD/libgpuos_shim.so"
cp -r "$BUILD/python_hooks" "$CONTEXT/"
cp "$ROOT/deploy/k8s/find_container_pids.sh" "$CONTEXT/"
cp "$ROOT/deploy/container/Containerfile" "$CONTEXT/"
"$ENGINE" build ${GPUOS_IMAGE_BUILD_ARGS:-} --build-arg BASE="$BASE" -t "$IMAGE" -f "$CONTEXT/Containerfile" "$CONTEXT"
echo "built $IMAGE"
