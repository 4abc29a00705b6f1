#!/usr/bin/env bash
# Runs every Python experiment script with tiny CPU settings and checks what
# it must do: exit status, the final `<script>: variant=... device=...
# samples_per_s=... steps_per_s=...` line, and a few properties that hold on
# any machine (same batches whatever the number of workers, loss falls,
# --preprocess-us really costs CPU time, bad options exit 2).
#   workloads/python/test_scripts.sh            (PYTHON=... to pick the interpreter)
# Exit status: 0 all passed, 1 some failed, 77 no Python with torch+torchvision
# (ctest's SKIP_RETURN_CODE).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/gpuos-pytest.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# Debian's python3-torch lives under /usr/bin/python3, which need not be the
# python3 first on PATH.
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
if ! PY=$(pick_python); then
  echo "SKIP: no Python here imports torch and torchvision (apt-get install python3-torch python3-torchvision, or set PYTHON)"
  exit 77
fi
echo "python: $PY ($("$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)'))"

PASSED=0
FAILED=0
pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() {
  echo "FAIL $1: $2"
  FAILED=$((FAILED + 1))
  if [[ -n "${3:-}" && -s "$3" ]]; then sed 's/^/    | /' "$3" | tail -n 15; fi
}

# run NAME EXPECTED_RC SCRIPT ARGS...: runs the script on the CPU with one
# thread; leaves stdout in $WORK/NAME.out, stderr in $WORK/NAME.err.
# Returns 0 when the exit status was EXPECTED_RC.
run() {
  local name=$1 want=$2 script=$3
  shift 3
  timeout 600 "$PY" "$HERE/$script" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  if [[ $rc -ne $want ]]; then
    fail "$name" "exit status $rc, wanted $want" "$WORK/$name.err"
    return 1
  fi
  return 0
}

# The value of KEY in the last line of NAME's stdout that starts with PREFIX.
field() {
  local name=$1 prefix=$2 key=$3
  grep "^$prefix: " "$WORK/$name.out" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$key=//p"
}

# Checks that NAME's last stdout line is `SCRIPT: variant=VARIANT device=cpu
# samples_per_s=N steps_per_s=N ...` with a positive throughput.
check_summary() {
  local name=$1 script=$2 variant=$3
  local last
  last=$(tail -n 1 "$WORK/$name.out")
  local pattern="^$script: variant=$variant device=cpu samples_per_s=[0-9]+\.[0-9]+ steps_per_s=[0-9]+\.[0-9]+( |$)"
  if ! [[ "$last" =~ $pattern ]]; then
    fail "$name" "last line is not the summary: '$last'" "$WORK/$name.err"
    return 1
  fi
  local sps
  sps=$(field "$name" "$script" samples_per_s)
  if ! awk -v v="$sps" 'BEGIN { exit !(v > 0) }'; then
    fail "$name" "samples_per_s=$sps is not positive"
    return 1
  fi
  return 0
}

common=(--device cpu --threads 1)

# --- resnet_data_pipeline: every variant, same data whatever the loading.
tiny_resnet=(--image-size 32 --batch-size 4 --steps 4 --warmup 1 "${common[@]}")
losses=()
for variant in baseline workers pinned prefetch; do
  name=resnet_$variant
  workers=()
  [[ $variant != baseline ]] && workers=(--num-workers 2)
  if run "$name" 0 resnet_data_pipeline.py --variant "$variant" "${workers[@]}" "${tiny_resnet[@]}" &&
     check_summary "$name" resnet_data_pipeline "$variant"; then
    pass "$name"
    losses+=("$(field "$name" resnet_data_pipeline loss)")
  fi
done
if [[ ${#losses[@]} -eq 4 ]]; then
  if [[ $(printf '%s\n' "${losses[@]}" | sort -u | wc -l) -eq 1 ]]; then
    pass "resnet: same loss for 0 and 2 workers, every variant (${losses[0]})"
  else
    fail "resnet: same loss for every variant" "losses ${losses[*]}"
  fi
fi
if [[ $(field resnet_workers resnet_data_pipeline workers) == 2 &&
      $(field resnet_baseline resnet_data_pipeline workers) == 0 ]]; then
  pass "resnet: workers key follows --variant and --num-workers"
else
  fail "resnet: workers key" "baseline=$(field resnet_baseline resnet_data_pipeline workers) workers=$(field resnet_workers resnet_data_pipeline workers)"
fi
if grep -q "pin_memory, non_blocking and the copy stream are left out" "$WORK/resnet_pinned.err"; then
  pass "resnet: pinned on the CPU says what it leaves out"
else
  fail "resnet: pinned on the CPU says what it leaves out" "no note on stderr" "$WORK/resnet_pinned.err"
fi

# --- dataloader_sweep: identical batches for 0 and 2 workers, and learning.
tiny_sweep=(--batch-size 32 --steps 30 --warmup 5 --hidden 64 "${common[@]}")
for workers in 0 2; do
  name=sweep_w$workers
  if run "$name" 0 dataloader_sweep.py --num-workers "$workers" "${tiny_sweep[@]}" &&
     check_summary "$name" dataloader_sweep "workers$workers"; then
    pass "$name"
  fi
done
l0=$(field sweep_w0 dataloader_sweep loss)
l2=$(field sweep_w2 dataloader_sweep loss)
f0=$(field sweep_w0 dataloader_sweep first_loss)
if [[ -n "$l0" && "$l0" == "$l2" ]]; then
  pass "sweep: same loss with 0 and 2 workers ($l0)"
else
  fail "sweep: same loss with 0 and 2 workers" "'$l0' vs '$l2'"
fi
if [[ -n "$l0" && -n "$f0" ]] && awk -v a="$l0" -v b="$f0" 'BEGIN { exit !(a < b) }'; then
  pass "sweep: loss falls ($f0 -> $l0)"
else
  fail "sweep: loss falls" "first_loss=$f0 loss=$l0"
fi
# 3 measured steps x 8 samples x 2 ms of CPU each: "get batch" cannot take
# less than 48 ms of wall time with no workers.
if run sweep_preprocess 0 dataloader_sweep.py --preprocess-us 2000 --batch-size 8 --steps 4 \
     --warmup 1 --hidden 16 "${common[@]}" &&
   check_summary sweep_preprocess dataloader_sweep workers0; then
  gb=$(field sweep_preprocess dataloader_sweep get_batch_s)
  if awk -v v="$gb" 'BEGIN { exit !(v >= 0.048) }'; then
    pass "sweep: --preprocess-us 2000 costs >= 48 ms of get batch (get_batch_s=$gb)"
  else
    fail "sweep: --preprocess-us costs CPU time" "get_batch_s=$gb < 0.048"
  fi
fi

# --- compile_eager: the eager half always; the compiled half where torch.compile exists.
has_compile=$("$PY" -c 'import torch; print(int(hasattr(torch, "compile")))')
if run compile_small 0 compile_eager.py --model small --hidden 32 --steps 6 --warmup 2 "${common[@]}"; then
  if [[ $has_compile == 1 ]]; then
    want_variant='eager\+compiled'; want_compiled=yes
  else
    want_variant=eager; want_compiled=unavailable
  fi
  if check_summary compile_small compile_eager "$want_variant"; then
    got=$(field compile_small compile_eager compiled)
    if [[ $got == "$want_compiled" ]]; then
      pass "compile_small (compiled=$got)"
    else
      fail compile_small "compiled=$got, wanted $want_compiled"
    fi
  fi
  if [[ $has_compile == 0 ]]; then
    if grep -q "torch.compile needs PyTorch 2.0 or later" "$WORK/compile_small.err"; then
      pass "compile: says clearly that torch.compile is missing"
    else
      fail "compile: says that torch.compile is missing" "no such line on stderr" "$WORK/compile_small.err"
    fi
    run compile_only_compiled 1 compile_eager.py --only compiled --hidden 32 --steps 4 --warmup 1 \
      "${common[@]}" && pass "compile: --only compiled without torch.compile exits 1"
  fi
fi
if run compile_large 0 compile_eager.py --model large --hidden 48 --layers 2 --steps 5 --warmup 1 \
     --only eager "${common[@]}" && check_summary compile_large compile_eager eager; then
  # 784*48+48 + 48*48+48 + 48*10+10 parameters with the overrides.
  params=$(field compile_large compile_eager params)
  if [[ $params == $((784 * 48 + 48 + 48 * 48 + 48 + 48 * 10 + 10)) ]]; then
    pass "compile_large: --hidden/--layers override the model ($params parameters)"
  else
    fail compile_large "params=$params"
  fi
fi

# --- transfer_bench: pageable cases on the CPU, one line each, then the summary.
if run transfer 0 transfer_bench.py --small-bytes 16K --large-bytes 1M --total-bytes 4M --device cpu &&
   check_summary transfer transfer_bench all; then
  cases=$(grep -c '^transfer_bench case: memory=pageable .* gb_per_s=[0-9.]*[1-9]' "$WORK/transfer.out")
  copies=$(grep '^transfer_bench case:' "$WORK/transfer.out" | tr ' ' '\n' | sed -n 's/^copies=//p' |
           awk '{ s += $1 } END { print s }')
  measured=$(field transfer transfer_bench measured_steps)
  # 4M in 16K copies is 256 a case, in 1M copies 4: (256 + 4) x sync, non_blocking.
  if [[ $cases == 4 && $copies == 520 && $measured == 520 ]]; then
    pass "transfer: 4 pageable cases with GB/s > 0, 520 copies counted"
  else
    fail transfer "cases=$cases copies=$copies measured_steps=$measured" "$WORK/transfer.out"
  fi
fi

# --- bad options: one line naming the problem, exit 2.
# expect_error NAME RC PATTERN SCRIPT ARGS...: exit status RC and PATTERN on stderr.
expect_error() {
  local name=$1 rc=$2 pattern=$3
  shift 3
  run "$name" "$rc" "$@" || return
  if grep -q -- "$pattern" "$WORK/$name.err"; then
    pass "$name: exit $rc, says '$pattern'"
  else
    fail "$name" "stderr does not say '$pattern'" "$WORK/$name.err"
  fi
}
expect_error bad_steps 2 "--steps must be at least 1" dataloader_sweep.py --steps 0 "${common[@]}"
expect_error bad_warmup 2 "--warmup must be" resnet_data_pipeline.py --steps 3 --warmup 3 "${common[@]}"
expect_error bad_variant 2 "invalid choice" resnet_data_pipeline.py --variant fast "${common[@]}"
expect_error bad_size 2 "larger than --large-bytes" transfer_bench.py --small-bytes 2M \
  --large-bytes 1M --device cpu
if [[ $("$PY" -c 'import torch; print(int(torch.cuda.is_available()))') == 0 ]]; then
  expect_error no_cuda 2 "sees no CUDA device" compile_eager.py --device cuda
fi

# --- run_gpu_suite.sh's pieces that need neither GPU nor tracer: the grid
# and the diagnosis cell.
SUITE=$HERE/../run_gpu_suite.sh
listed=$("$SUITE" --list 2>&1)
want_runs="trainer-mlp-w0 trainer-mlp-w4 trainer-mlp-w4-pinned trainer-mlp-w4-copystream
trainer-mlp-w4-cudagraph trainer-cnn-w0 trainer-cnn-w4 trainer-cnn-w4-pinned
trainer-cnn-w4-copystream trainer-cnn-w4-cudagraph resnet-baseline resnet-workers resnet-pinned
resnet-prefetch sweep-w0 sweep-w2 sweep-w4 sweep-w8 transfer compile-small compile-large"
got_runs=$(awk '{ print $1 }' <<<"$listed" | tr '\n' ' ' | sed 's/ $//')
if [[ $(tr -s ' \n' ' ' <<<"$want_runs" | sed 's/ $//') == "$got_runs" ]] &&
   grep -q -- "--device cuda --variant prefetch" <<<"$listed" &&
   ! grep -q -- "--device cpu" <<<"$listed"; then
  pass "suite: --list gives the 21 runs, on cuda"
else
  fail "suite: --list" "got: $got_runs"
fi
only=$("$SUITE" --list --cpu-smoke --only '^sweep' 2>&1 | awk '{ print $1 }' | tr '\n' ' ')
if [[ $only == "sweep-w0 sweep-w2 sweep-w4 sweep-w8 " ]]; then
  pass "suite: --only selects runs"
else
  fail "suite: --only" "got: $only"
fi
diag_ok=1
while IFS='|' read -r json want; do
  printf '%s\n' "$json" >"$WORK/report.json"
  got=$("$SUITE" --diagnosis "$WORK/report.json" 2>&1)
  if [[ "$got" != "$want" ]]; then
    fail "suite: diagnosis of $json" "got '$got', wanted '$want'"
    diag_ok=0
  fi
done <<'EOF'
{"diagnosis": "input-bound:\n GPU idle 61%"}|input-bound: GPU idle 61%
{"diagnosis": {"verdict": "launch-bound", "share": 0.4}}|launch-bound
{"diagnosis": [{"summary": "a"}, "b"]}|a; b
{"diagnosis": {"share": 0.4}}|share=0.4
{"processes": []}|-
{"diagnosis": null}|-
not json|-
EOF
((diag_ok)) && pass "suite: diagnosis cell from report JSON (string, object, list, none, broken)"

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
