#!/usr/bin/env bash
# The workload suite in one call on the GPU machine (under 10 minutes), from
# the repo root:
#   workloads/run_gpu_suite.sh [options] [BIN_DIR]
# BIN_DIR (or GPUOS_BIN_DIR; default build-gpu/) holds a prebuilt static
# gpuos-trace and libgpuos_shim.so, built elsewhere because the GPU machine
# has no libbpf or protobuf.  The suite
#   1. builds gpuos-trainer against PyTorch's LibTorch, configuring only
#      workloads/ (through a generated top-level CMakeLists.txt, so nothing
#      of the tracer is configured).  gpuos-trainer needs Abseil, which the
#      GPU machine lacks: stage Debian's beforehand with
#      `workloads/run_gpu_suite.sh --stage-absl BIN_DIR` on the build machine
#      (copies headers, archives and CMake files into BIN_DIR/absl);
#   2. runs a grid of short runs (gpuos-trainer: mlp and cnn, 0 vs 4 workers,
#      pageable vs pinned, copy stream, CUDA graph; the Python scripts of
#      workloads/python/), each untraced and then under
#      `gpuos-trace -q -o $OUT/<name>.gpuos --`, and reads the throughput
#      from each run's final key=value line;
#   3. prints ONE table last: run, untraced and traced samples/s, overhead %
#      and the diagnosis of `gpuos-trace report FILE --format json`.
# A run that fails prints the tail of its output and the suite goes on;
# runs that would end past the time budget (default 540 s from the start)
# are skipped.  Output in $OUT (default ./gpu-suite-out), few files so
# that the device tool (8 files back) returns them: results.tsv,
# logs.tar.gz (every run's stdout/stderr, reports, build.log) and the
# traces <name>.gpuos (GPUOS_SUITE_KEEP_TRACES=0 deletes each once reported).
#
# --cpu-smoke runs the same grid with tiny sizes on the CPU (Debian's
# python3-torch and a CPU gpuos-trainer): the grid, parsing, failure and
# budget handling can be tested without a GPU; CUDA-only trainer runs fail
# there on purpose ("needs --device cuda").
set -u

usage() {
  cat <<'EOF'
usage: workloads/run_gpu_suite.sh [options] [BIN_DIR]
  BIN_DIR            folder with gpuos-trace and libgpuos_shim.so (default: $GPUOS_BIN_DIR or build-gpu)
  --cpu-smoke        tiny CPU versions of every run, to test the suite without a GPU
  --no-build         do not build gpuos-trainer; use BIN_DIR's or the last build's
  --trainer PATH     use this gpuos-trainer (implies --no-build)
  --budget SECONDS   skip runs that would end later than this after the start (default 540)
  --only REGEX       run only the runs whose name matches REGEX (grep -E)
  --list             print the runs and their commands, run nothing
  --diagnosis FILE   print the table's diagnosis cell for a `report --format json` file and exit
  --stage-absl DIR   (on the build machine) copy Debian's Abseil into DIR/absl and exit
environment: OUT (output folder, default ./gpu-suite-out), PYTHON (interpreter with torch),
  GPUOS_ABSL_PREFIX (Abseil prefix, default BIN_DIR/absl), GPUOS_SUITE_BUILD_DIR
  (default /tmp/gpuos-workloads-build), GPUOS_SUITE_RUN_CAP (max seconds per invocation, default 150),
  GPUOS_SUITE_KEEP_TRACES=0 (delete each trace once its report is read),
  GPUOS_SUITE_CMAKE_ARGS (more -D switches for the trainer's configure)
EOF
}

SUITE_START=$(date +%s.%N)
REPO=$(cd "$(dirname "$0")/.." && pwd)
MODE=gpu
BUILD=1
TRAINER=""
BUDGET_S=${GPUOS_SUITE_BUDGET_S:-540}
ONLY=""
LIST=0
DIAGNOSIS_OF=""
BIN_DIR=${GPUOS_BIN_DIR:-build-gpu}
RUN_CAP=${GPUOS_SUITE_RUN_CAP:-150}
# Outside BIN_DIR, which travels to the GPU machine and should stay small.
BUILD_DIR=${GPUOS_SUITE_BUILD_DIR:-${TMPDIR:-/tmp}/gpuos-workloads-build}
SMOKE_EST=15

elapsed() { awk -v s="$SUITE_START" -v n="$(date +%s.%N)" 'BEGIN { printf "%d", n - s }'; }
say() { printf '[%4ss] %s\n' "$(elapsed)" "$*"; }

# Renders the "diagnosis" member of a JSON report in one short line, or "-".
read_diagnosis() {
  "${PY:-python3}" - "$1" <<'EOF' 2>/dev/null || echo "-"
import json, sys

def text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("summary", "verdict", "headline", "bottleneck", "label", "kind", "text",
                    "message"):
            if isinstance(value.get(key), str) and value[key]:
                return value[key]
        return "; ".join("%s=%s" % (k, v) for k, v in value.items()
                         if isinstance(v, (str, int, float, bool)))
    if isinstance(value, list):
        return "; ".join(filter(None, (text(item) for item in value)))
    return "" if value is None else str(value)

try:
    report = json.load(open(sys.argv[1]))
except Exception:
    print("-")
    sys.exit(0)
found = report.get("diagnosis") if isinstance(report, dict) else None
line = " ".join(text(found).split()) if found is not None else ""
print(line or "-")
EOF
}

# Copies Debian's libabsl-dev (headers, static archives, the shared objects
# its CMake files check for, and those CMake files, which locate everything
# relative to themselves) into DIR/absl, for the GPU machine's build.
stage_absl() {
  local dest=$1/absl
  local config
  config=$(ls /usr/lib/*/cmake/absl/abslConfig.cmake 2>/dev/null | head -n 1)
  if [[ -z "$config" || ! -d /usr/include/absl ]]; then
    echo "run_gpu_suite: no Abseil here to stage (apt-get install libabsl-dev)" >&2
    return 1
  fi
  local libdir arch
  libdir=$(dirname "$(dirname "$(dirname "$config")")")
  arch=$(basename "$libdir")
  rm -rf "$dest"
  mkdir -p "$dest/include" "$dest/lib/$arch/cmake" || return 1
  cp -a /usr/include/absl "$dest/include/" &&
    cp -a "$libdir/cmake/absl" "$dest/lib/$arch/cmake/" &&
    cp -a "$libdir"/libabsl_*.a "$libdir"/libabsl_*.so* "$dest/lib/$arch/" || return 1
  echo "run_gpu_suite: staged Abseil ($(du -sh "$dest" | cut -f1)) in $dest"
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --cpu-smoke) MODE=cpu ;;
    --no-build) BUILD=0 ;;
    --trainer) TRAINER=${2:?--trainer needs a path}; BUILD=0; shift ;;
    --budget) BUDGET_S=${2:?--budget needs seconds}; shift ;;
    --only) ONLY=${2:?--only needs a regular expression}; shift ;;
    --list) LIST=1 ;;
    --diagnosis) DIAGNOSIS_OF=${2:?--diagnosis needs a report.json}; shift ;;
    --stage-absl) stage_absl "${2:?--stage-absl needs a folder}"; exit $? ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run_gpu_suite: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BIN_DIR=$1 ;;
  esac
  shift
done
if ! [[ "$BUDGET_S" =~ ^[0-9]+$ ]]; then
  echo "run_gpu_suite: --budget takes whole seconds, got '$BUDGET_S'" >&2
  exit 2
fi

if [[ -n "$DIAGNOSIS_OF" ]]; then
  PY=""
  read_diagnosis "$DIAGNOSIS_OF"
  exit 0
fi

BIN_DIR=$(realpath -m "$BIN_DIR")
OUT=$(realpath -m "${OUT:-./gpu-suite-out}")
TRACE=$BIN_DIR/gpuos-trace
SHIM=$BIN_DIR/libgpuos_shim.so
PYDIR=$REPO/workloads/python

# The interpreter that has torch (on the GPU machine, plain python3; on a
# Debian build machine /usr/bin/python3 may not be the python3 on PATH).
pick_python() {
  local candidate
  for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$candidate" -c 'import torch, torchvision' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}
PY=$(pick_python) || PY=""

# ---------------------------------------------------------------- the grid
# Each run: NAME, summary-line prefix, expected seconds for both invocations
# (for the budget guard), then the command.  Appended in priority order.
RUN_NAMES=()
RUN_PREFIX=()
RUN_EST=()
RUN_CMD=()   # the command, as one string of %q-quoted words

add_run() {
  local name=$1 prefix=$2 est=$3
  shift 3
  if [[ -n "$ONLY" ]] && ! grep -qE -- "$ONLY" <<<"$name"; then return; fi
  # Tiny CPU runs take seconds whatever their GPU counterpart takes.
  [[ $MODE == cpu ]] && est=$SMOKE_EST
  RUN_NAMES+=("$name")
  RUN_PREFIX+=("$prefix")
  RUN_EST+=("$est")
  RUN_CMD+=("$(printf '%q ' "$@")")
}

TRAINER_PLACEHOLDER=@TRAINER@
define_grid() {
  local dev t py
  if [[ $MODE == gpu ]]; then
    dev=cuda
  else
    dev=cpu
  fi
  t=$TRAINER_PLACEHOLDER
  py=${PY:-python3}

  # gpuos-trainer.  --preprocess-us makes loading cost real CPU time, so
  # that 0 vs 4 workers matters; the CUDA-only options fail on --cpu-smoke.
  local mlp cnn
  if [[ $MODE == gpu ]]; then
    mlp=(--model mlp --batch-size 64 --steps 300 --warmup 30 --preprocess-us 20)
    cnn=(--model cnn --image-size 3x64x64 --batch-size 64 --steps 80 --warmup 10 --preprocess-us 20)
  else
    mlp=(--model mlp --hidden 64 --batch-size 16 --steps 8 --warmup 2 --preprocess-us 20)
    cnn=(--model cnn --hidden 8 --image-size 3x32x32 --batch-size 8 --steps 5 --warmup 1)
  fi
  local model margs
  for model in mlp cnn; do
    if [[ $model == mlp ]]; then margs=("${mlp[@]}"); else margs=("${cnn[@]}"); fi
    add_run "trainer-$model-w0" gpuos-trainer 25 "$t" --device $dev "${margs[@]}" --workers 0
    add_run "trainer-$model-w4" gpuos-trainer 25 "$t" --device $dev "${margs[@]}" --workers 4
    add_run "trainer-$model-w4-pinned" gpuos-trainer 25 "$t" --device $dev "${margs[@]}" \
      --workers 4 --pin-memory --non-blocking
    add_run "trainer-$model-w4-copystream" gpuos-trainer 25 "$t" --device $dev "${margs[@]}" \
      --workers 4 --pin-memory --non-blocking --copy-stream
    add_run "trainer-$model-w4-cudagraph" gpuos-trainer 30 "$t" --device $dev "${margs[@]}" \
      --workers 4 --pin-memory --non-blocking --cuda-graph
  done

  # The Nsight Systems article: ResNet-18, 3x512x512, batch 64.  The
  # baseline loads in one process and is slow: fewer steps.
  local resnet base
  if [[ $MODE == gpu ]]; then
    base=(--steps 12 --warmup 2)
    resnet=(--steps 30 --warmup 5)
  else
    base=(--steps 4 --warmup 1 --image-size 32 --batch-size 4)
    resnet=(--steps 4 --warmup 1 --image-size 32 --batch-size 4 --num-workers 2)
  fi
  add_run resnet-baseline resnet_data_pipeline 60 "$py" "$PYDIR/resnet_data_pipeline.py" \
    --device $dev --variant baseline "${base[@]}"
  local variant
  for variant in workers pinned prefetch; do
    add_run "resnet-$variant" resnet_data_pipeline 40 "$py" "$PYDIR/resnet_data_pipeline.py" \
      --device $dev --variant $variant "${resnet[@]}"
  done

  # The practical guide's num_workers sweep with a lightweight MLP.
  local sweep workers
  if [[ $MODE == gpu ]]; then
    sweep=(--steps 60 --warmup 10 --batch-size 256 --preprocess-us 50)
  else
    sweep=(--steps 6 --warmup 2 --batch-size 16 --hidden 32 --preprocess-us 50)
  fi
  for workers in 0 2 4 8; do
    add_run "sweep-w$workers" dataloader_sweep 25 "$py" "$PYDIR/dataloader_sweep.py" \
      --device $dev --num-workers $workers "${sweep[@]}"
  done

  # Pageable vs pinned, small vs large, sync vs non_blocking.
  if [[ $MODE == gpu ]]; then
    add_run transfer transfer_bench 30 "$py" "$PYDIR/transfer_bench.py" --device $dev
  else
    add_run transfer transfer_bench 15 "$py" "$PYDIR/transfer_bench.py" --device $dev \
      --small-bytes 16K --large-bytes 1M --total-bytes 4M
  fi

  # Eager vs torch.compile: last, because compiling takes the longest.
  if [[ $MODE == gpu ]]; then
    add_run compile-small compile_eager 150 "$py" "$PYDIR/compile_eager.py" --device $dev \
      --model small --mode reduce-overhead --steps 100 --warmup 20
    add_run compile-large compile_eager 150 "$py" "$PYDIR/compile_eager.py" --device $dev \
      --model large --mode default --steps 30 --warmup 10
  else
    add_run compile-small compile_eager 15 "$py" "$PYDIR/compile_eager.py" --device $dev \
      --model small --hidden 32 --steps 6 --warmup 2
    add_run compile-large compile_eager 15 "$py" "$PYDIR/compile_eager.py" --device $dev \
      --model large --hidden 64 --layers 2 --steps 5 --warmup 1
  fi
}

define_grid
if [[ $LIST == 1 ]]; then
  for i in "${!RUN_NAMES[@]}"; do
    printf '%-28s ~%3ss  %s\n' "${RUN_NAMES[$i]}" "${RUN_EST[$i]}" "${RUN_CMD[$i]}"
  done
  exit 0
fi

rm -rf "$OUT/logs" "$OUT/logs.tar.gz" "$OUT/results.tsv"  # a previous suite's, not this one's
mkdir -p "$OUT/logs" || exit 1
say "gpuos-trace workload suite ($MODE): binaries from $BIN_DIR, output in $OUT, budget ${BUDGET_S}s"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 4
fi
if [[ -n "$PY" ]]; then
  "$PY" -c 'import sys, torch, torchvision; print("python", sys.version.split()[0], "torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.cuda.is_available())' 2>&1
else
  say "no Python imports torch and torchvision: the Python runs will fail (set PYTHON)"
fi
TRACE_OK=1
for file in "$TRACE" "$SHIM"; do
  if [[ ! -e "$file" ]]; then
    say "missing $file: traced runs are left out"
    TRACE_OK=0
  fi
done

# --------------------------------------------------------------- the build
BUILD_NOTE=""
# Writes the top-level CMakeLists.txt that configures workloads/ alone,
# with Abseil linked from its static archives (as cmake/StaticDeps.cmake
# does for the tracer), so the trainer needs nothing at run time but
# LibTorch and CUDA.
write_wrapper() {
  cat >"$1/CMakeLists.txt" <<'EOF'
# Generated by workloads/run_gpu_suite.sh: gpuos-trainer alone, for machines
# where the tracer's dependencies (libbpf, protobuf) are missing.
cmake_minimum_required(VERSION 3.20)
project(gpuos_workloads LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(GPUOS_BUILD_WORKLOADS ON)
set(GPUOS_BUILD_TESTS OFF)
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
get_filename_component(_absl_libdir "${absl_DIR}/../.." ABSOLUTE)
file(GLOB _absl_archives "${_absl_libdir}/libabsl_*.a")
foreach(_archive IN LISTS _absl_archives)
  get_filename_component(_name ${_archive} NAME_WE)
  string(REGEX REPLACE "^libabsl_" "" _name ${_name})
  if(TARGET absl::${_name})
    get_target_property(_type absl::${_name} TYPE)
    if(NOT _type STREQUAL "INTERFACE_LIBRARY")
      foreach(_config "" _NONE _RELEASE _RELWITHDEBINFO _DEBUG)
        set_target_properties(absl::${_name} PROPERTIES IMPORTED_LOCATION${_config} ${_archive})
      endforeach()
    endif()
  endif()
endforeach()
add_subdirectory(${GPUOS_REPO_DIR}/workloads workloads)
if(NOT TARGET gpuos-trainer)
  message(FATAL_ERROR "gpuos-trainer was not configured (see the lines above for why)")
endif()
EOF
}

build_trainer() {
  local build_dir=$BUILD_DIR
  local log=$OUT/logs/build.log
  local started=$(elapsed)
  mkdir -p "$build_dir/wrapper" || { BUILD_NOTE="cannot create $build_dir"; return 1; }
  write_wrapper "$build_dir/wrapper"
  local torch_prefix=""
  [[ -n "$PY" ]] && torch_prefix=$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  local absl_prefix=${GPUOS_ABSL_PREFIX:-$BIN_DIR/absl}
  local args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUOS_REPO_DIR="$REPO"
              -DCMAKE_PREFIX_PATH="$torch_prefix;$absl_prefix")
  local absl_config
  absl_config=$(ls -d "$absl_prefix"/lib/*/cmake/absl "$absl_prefix"/lib/cmake/absl 2>/dev/null | head -n 1)
  [[ -n "$absl_config" ]] && args+=(-Dabsl_DIR="$absl_config")
  # PyTorch's CMake files enable the CUDA language: they need nvcc.
  if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  if [[ $MODE == gpu ]]; then
    args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
    # PyTorch's CMake files look for cuDNN by the unversioned libcudnn.so,
    # which the pip wheels (site-packages/nvidia/...) do not ship: point
    # them at the wheel's files.
    local cudnn
    cudnn=$("$PY" - <<'EOF' 2>/dev/null
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
inc = sorted(glob.glob(os.path.join(site, "nvidia", "**", "include", "cudnn.h"), recursive=True))
lib = sorted(glob.glob(os.path.join(site, "nvidia", "**", "lib", "libcudnn.so*"), recursive=True))
if inc and lib:
    print(os.path.dirname(inc[0]) + "|" + lib[0])
EOF
)
    if [[ -n "$cudnn" && ! -e /usr/include/cudnn.h ]]; then
      args+=(-DCUDNN_INCLUDE_PATH="${cudnn%%|*}" -DCUDNN_LIBRARY_PATH="${cudnn##*|}")
    fi
  fi
  # Extra switches for whatever else a LibTorch needs on that machine.
  local -a extra=()
  read -r -a extra <<<"${GPUOS_SUITE_CMAKE_ARGS:-}"
  args+=("${extra[@]}")
  local limit=$((BUDGET_S - $(elapsed)))
  ((limit > 360)) && limit=360
  say "building gpuos-trainer in $build_dir (LibTorch from ${torch_prefix:-the system}, Abseil from ${absl_config:-the system}; log: logs/build.log)"
  {
    echo "+ cmake -S $build_dir/wrapper -B $build_dir ${args[*]}"
    timeout "$limit" cmake -S "$build_dir/wrapper" -B "$build_dir" "${args[@]}"
  } >"$log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    limit=$((BUDGET_S - $(elapsed)))
    ((limit > 360)) && limit=360
    {
      echo "+ cmake --build $build_dir --target gpuos-trainer -j $(nproc)"
      timeout "$limit" cmake --build "$build_dir" --target gpuos-trainer -j "$(nproc)"
    } >>"$log" 2>&1
    rc=$?
  fi
  if [[ $rc -ne 0 || ! -x "$build_dir/gpuos-trainer" ]]; then
    BUILD_NOTE="gpuos-trainer build failed (exit $rc; logs/build.log in logs.tar.gz)"
    say "$BUILD_NOTE; its last lines:"
    grep -v '^\[' "$log" | tail -n 25 | sed 's/^/    | /'
    return 1
  fi
  TRAINER=$build_dir/gpuos-trainer
  BUILD_NOTE="gpuos-trainer built in $(( $(elapsed) - started ))s"
  say "$BUILD_NOTE"
}

if [[ -z "$TRAINER" && $BUILD == 1 ]]; then
  build_trainer
fi
if [[ -z "$TRAINER" ]]; then
  # Not built (--no-build, or the build failed): one that was handed over
  # in BIN_DIR, else (--no-build only) the last build's.
  candidates=("$BIN_DIR/gpuos-trainer")
  [[ $BUILD == 0 ]] && candidates+=("$BUILD_DIR/gpuos-trainer")
  for candidate in "${candidates[@]}"; do
    if [[ -x "$candidate" ]]; then TRAINER=$candidate; break; fi
  done
fi
if [[ -z "$TRAINER" ]]; then
  TRAINER=$BIN_DIR/gpuos-trainer  # absent: its runs fail and say so
  [[ -z "$BUILD_NOTE" ]] && BUILD_NOTE="no gpuos-trainer (not built: --no-build)"
fi
if [[ -x "$TRAINER" ]]; then say "trainer: $TRAINER"; else say "trainer: $TRAINER is missing: its runs fail"; fi

# ----------------------------------------------------------------- running
R_UNTRACED=()
R_TRACED=()
R_OVERHEAD=()
R_DIAG=()

# Prints the summary line's samples_per_s, or nothing.
read_samples() {
  grep "^$2: " "$1" 2>/dev/null | tail -n 1 | tr ' ' '\n' | sed -n 's/^samples_per_s=//p'
}


# invoke LOG_BASE LIMIT CMD...: runs CMD with a time limit; stdout and
# stderr go to LOG_BASE.out/.err.  Returns CMD's exit status (124: timed out).
invoke() {
  local base=$1 limit=$2
  shift 2
  timeout --kill-after=10 "$limit" "$@" >"$base.out" 2>"$base.err"
}

show_failure() {  # show_failure NAME WHAT RC LOG_BASE
  local what=$2 rc=$3 base=$4
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    say "$1: $what run timed out; last lines of its output:"
  else
    say "$1: $what run failed (exit $rc); last lines of its output:"
  fi
  # Errors come first (gpuos-trainer: one line, then its usage) or last (a
  # Python traceback): show both ends of stderr, then the end of stdout.
  if [[ $(wc -l <"$base.err") -gt 12 ]]; then
    head -n 2 "$base.err" | sed 's/^/    | /'
    echo "    | ..."
    tail -n 8 "$base.err" | sed 's/^/    | /'
  else
    sed 's/^/    | /' "$base.err"
  fi
  tail -n 3 "$base.out" 2>/dev/null | sed 's/^/    > /'
}

status_cell() {  # status_cell RC: what to put in a throughput cell for a failed run
  if [[ $1 -eq 124 || $1 -eq 137 ]]; then echo "timeout"; else echo "fail(rc=$1)"; fi
}

printf 'run\tuntraced_samples_per_s\ttraced_samples_per_s\toverhead_pct\tdiagnosis\tcommand\n' \
  >"$OUT/results.tsv"

for i in "${!RUN_NAMES[@]}"; do
  name=${RUN_NAMES[$i]}
  prefix=${RUN_PREFIX[$i]}
  est=${RUN_EST[$i]}
  eval "cmd=(${RUN_CMD[$i]})"
  for j in "${!cmd[@]}"; do
    [[ ${cmd[$j]} == "$TRAINER_PLACEHOLDER" ]] && cmd[$j]=$TRAINER
  done
  left=$((BUDGET_S - $(elapsed)))
  untraced="skipped"; traced="skipped"; overhead="-"; diag="-"
  if ((left < est)); then
    say "$name: skipped (${left}s of the budget left, it needs ~${est}s)"
  else
    limit=$((left < RUN_CAP ? left : RUN_CAP))
    base=$OUT/logs/$name.untraced
    invoke "$base" "$limit" "${cmd[@]}"
    rc=$?
    untraced=$(read_samples "$base.out" "$prefix")
    if [[ $rc -ne 0 ]]; then
      show_failure "$name" untraced "$rc" "$base"
      untraced=$(status_cell "$rc")
    elif [[ -z "$untraced" ]]; then
      say "$name: exit 0 but no '$prefix: ... samples_per_s=' line"
      untraced="no-summary"
    fi
    left=$((BUDGET_S - $(elapsed)))
    if [[ $TRACE_OK == 0 ]]; then
      traced="no-tracer"
    elif [[ $rc -ne 0 ]]; then
      traced="-"  # the workload itself fails: tracing it says nothing more
    elif ((left < est / 2)); then
      traced="skipped"
      say "$name: traced run skipped (${left}s of the budget left)"
    else
      limit=$((left < RUN_CAP ? left : RUN_CAP))
      base=$OUT/logs/$name.traced
      trace_file=$OUT/$name.gpuos
      rm -f "$trace_file"
      invoke "$base" "$limit" "$TRACE" -q -o "$trace_file" -- "${cmd[@]}"
      trc=$?
      traced=$(read_samples "$base.out" "$prefix")
      if [[ $trc -ne 0 ]]; then
        show_failure "$name" traced "$trc" "$base"
        traced=$(status_cell "$trc")
      elif [[ -z "$traced" ]]; then
        say "$name: traced run exited 0 but printed no '$prefix:' summary line"
        traced="no-summary"
      fi
      if [[ -s "$trace_file" ]]; then
        # Past the budget a report may still take 30 s: the device call's
        # 10 minutes leave that much room.
        rlimit=$((BUDGET_S + 30 - $(elapsed)))
        ((rlimit > 60)) && rlimit=60
        ((rlimit < 5)) && rlimit=5
        # The report leaves out the same warm-up steps as the workload's own
        # throughput figure (its --warmup N), so both describe steady state.
        warmup=1
        for ((wi = 0; wi + 1 < ${#cmd[@]}; wi++)); do
          [[ ${cmd[wi]} == --warmup ]] && warmup=${cmd[wi + 1]}
        done
        timeout "$rlimit" "$TRACE" report "$trace_file" --format json --warmup-steps "$warmup" \
          >"$OUT/logs/$name.report.json" 2>"$OUT/logs/$name.report.err"
        rrc=$?
        if [[ $rrc -eq 0 || $rrc -eq 3 ]]; then  # 3: damaged file, readable part reported
          diag=$(read_diagnosis "$OUT/logs/$name.report.json")
        else
          diag="report failed (rc=$rrc)"
        fi
      fi
      [[ ${GPUOS_SUITE_KEEP_TRACES:-1} == 0 ]] && rm -f "$trace_file"
    fi
    if [[ "$untraced" =~ ^[0-9.]+$ && "$traced" =~ ^[0-9.]+$ ]]; then
      overhead=$(awk -v u="$untraced" -v t="$traced" 'BEGIN { if (u > 0) printf "%.1f", (u - t) / u * 100; else print "-" }')
    fi
    say "$name: untraced $untraced, traced $traced samples/s, overhead $overhead%"
  fi
  R_UNTRACED+=("$untraced")
  R_TRACED+=("$traced")
  R_OVERHEAD+=("$overhead")
  R_DIAG+=("$diag")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$untraced" "$traced" "$overhead" "$diag" \
    "${cmd[*]}" >>"$OUT/results.tsv"
done

# One archive instead of a file per run, so that results.tsv and the logs
# are among the few files the device tool brings back.
if tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs 2>/dev/null; then
  rm -rf "$OUT/logs"
fi

# ------------------------------------------------------------- the table
echo
echo "== gpuos-trace workload suite ($MODE), $(elapsed)s; ${BUILD_NOTE:-trainer given}; overhead = (untraced - traced) / untraced; rows in $OUT/results.tsv, logs in logs.tar.gz"
printf '%-28s %14s %14s %9s  %s\n' run "untraced/s" "traced/s" "overhead%" diagnosis
for i in "${!RUN_NAMES[@]}"; do
  d=${R_DIAG[$i]}
  ((${#d} > 60)) && d="${d:0:57}..."
  printf '%-28s %14s %14s %9s  %s\n' "${RUN_NAMES[$i]}" "${R_UNTRACED[$i]}" "${R_TRACED[$i]}" \
    "${R_OVERHEAD[$i]}" "$d"
done
