#!/usr/bin/env bash
# The unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (g++),
# in their own build directory (${GPUOS_ASAN_BUILD_DIR:-build-asan}).  Any
# sanitizer report fails the test that triggered it.  Not part of CI (a
# second full build does not fit its time budget; see docs/fuzzing.md):
#   bash deploy/sanitize.sh [ctest -R regex]
# Runtime tests are left out: they LD_PRELOAD the shim into uninstrumented
# programs, which an ASan-built shim cannot be.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${GPUOS_ASAN_BUILD_DIR:-build-asan}
jobs=${GPUOS_JOBS:-$(nproc)}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUOS_STATIC=OFF \
  -DGPUOS_BUILD_WORKLOADS=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" "$@" >/dev/null
# Only the unit tests (and the helper programs they run).
targets=(gpuos_test_workloads)
for test in $(find tests/unit -name "*_test.cc"); do targets+=("$(basename "$test" .cc)"); done
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Left out: the tests that bound memory growth, which ASan's quarantine of
# freed memory (256 MiB) defeats by design.
ctest --test-dir "$build_dir" -L unit --output-on-failure --timeout 300 -j "$jobs" \
  -E 'BoundedMemory' ${GPUOS_SANITIZE_TESTS:+-R "$GPUOS_SANITIZE_TESTS"}
