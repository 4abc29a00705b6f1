#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with Debian's clang under
# AddressSanitizer + UndefinedBehaviorSanitizer into ${GPUOS_FUZZ_BUILD_DIR:-build-fuzz}
# and runs each for a bounded time from its kept corpus (fuzz/corpus/<target>/).
# A crash, a hang (an input taking longer than -timeout), a leak or a
# sanitizer report fails the run; the input that did it is left in
# <build dir>/artifacts/.  CI runs it (deploy/test.sh); by hand:
#   bash deploy/fuzz.sh [seconds per target, default 40] [target...]
# New inputs found go to <build dir>/new_corpus/<target>/, not into the
# repository; add a reproducer to fuzz/corpus/<target>/ by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${GPUOS_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${GPUOS_JOBS:-$(nproc)}
seconds=${1:-40}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(trace_reader_fuzzer shim_message_fuzzer control_protocol_fuzzer)

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DGPUOS_FUZZ=ON -DGPUOS_STATIC=OFF \
  -DGPUOS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_C_FLAGS="$flags" "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build_dir/artifacts"
failed=()
for target in "${targets[@]}"; do
  corpus=fuzz/corpus/${target%_fuzzer}
  fresh="$build_dir/new_corpus/$target"
  mkdir -p "$fresh"
  echo "fuzz.sh: $target for ${seconds}s from $corpus"
  # The fresh directory first: libFuzzer adds what it finds there.
  # A fixed seed (GPUOS_FUZZ_SEED, default 1) so that a run can be repeated:
  # what CI finds, a developer finds again with the same command.
  if ! "$build_dir/$target" -seed="${GPUOS_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$target-" \
      "$fresh" "$corpus" >"$build_dir/$target.log" 2>&1; then
    failed+=("$target")
    tail -n 60 "$build_dir/$target.log"
  else
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|Done [0-9]+ runs" \
      "$build_dir/$target.log" | tr '\n' ' '
    echo
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: FAILED: ${failed[*]} (inputs in $build_dir/artifacts/, logs in $build_dir/*.log)" >&2
  exit 1
fi
echo "fuzz.sh: no crash, hang or sanitizer report"
