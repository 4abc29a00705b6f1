#!/usr/bin/env python3
"""Runs the corpus of un-annotated training scripts (workloads/corpus/) and
the LibTorch trainer under gpuos-trace, launched and attached, and checks
that the report is consistent with itself and with the job's own timing
(issue 17, point 5).  Python 3 standard library only.

  check_corpus.py --trace BIN [--python PY] [--trainer PATH] [--profile cpu|gpu]
                  [--only REGEX] [--modes LIST] [--work DIR] [--json FILE] [--budget S] [--list]

For each script, the modes (default: all that apply):
  launched   gpuos-trace -o T -- PY SCRIPT ...      (Python start-up hook on)
  nohooks    the same with --no-python-hooks         (Python scripts)
  nonvtx     gpuos-trainer --no-nvtx                 (the trainer)
  attached   the script started untraced; after its warm-up,
             gpuos-trace --pid PID --duration Ns
  uprobes    the same with --no-inject (CUDA seen through uprobes on
             libcuda only); not in the default --modes
Each trace is read with `gpuos-trace report --format json`.  A script run
as several ranks ("ranks" in its profile entry) is started through a
launcher and checked rank by rank as well: rank_checks.py; one of several
training processes that are not ranks ("processes"), process by process:
process_checks.py.

Checks, per row (a row fails with its reasons; exit status 1 if any does):
  run        the job and gpuos-trace exited 0 (attached: the job still
             logged an iteration after the attach ended) and the report
             was read
  steps      steps were found from the job's work: step_analysis.source is
             neither fixed_windows nor none, and at least 3 were measured
  thread     the steps are those of the job's driving thread: step_analysis.pid
             is the process started (not a DataLoader worker) and
             step_analysis.tid its main thread, or, where the job prints
             "loop thread tid N" (a loop run on a thread of its own), N
  own        the mean measured step is within 5% of the job's own mean
             iteration time over the same span (attached: the steps inside
             the span that the job's own timing lines cover)
  l=a        (attached rows) launched and attached agree: the mean step,
             each divided by the job's own iteration time in that run, within
             3% (the job's own speed may differ between the two runs; the
             raw means are printed too), and the same diagnosis.  A Python
             script's attached run has no Python-hook marks (the hook is
             loaded when the interpreter starts), so it is compared with the
             nohooks run where that ran (the same marks: what attaching
             itself changes), else with the launched one; what the hook adds
             is each row's own check
  a=u        (nohooks and nonvtx rows) annotated and un-annotated runs of the
             same job (same iteration count) find the same number of steps
             (within 1; or so once the un-annotated run's steps left out as
             "less work than the steady iteration", evaluations cut out as
             their own unit, are not counted; either run's extra work
             cut off the iteration after it is not counted either; nor,
             where both runs are un-annotated, the annotated run's own
             fragments left out as less work)
             and the same diagnosis
  Same diagnosis: the same bottleneck key; or launch_bound in one run
             near its threshold (diagnosis.near_threshold) and the other
             run's fallback naming it as its near miss (near_miss); or
             gpu_bound in one and GPU compute the dominant stage in the
             other (the same advice); or worker_process_wait where the
             hook's marks tell the workers are not a DataLoader's and
             data_loader_starvation where the run has no marks (same share,
             within 5 points); or, for a batch loaded in the
             training thread, data_loader_starvation where the Python hook's
             fetch ranges mark it and host_cpu_work where the trace has none,
             at the same share of step time (within 5 points; same_finding)

The job's own timing: every script prints a line containing "<X> ms/iter"
(the mean iteration time since its previous such line) every few
iterations and, last, "RESULT ... iters=N warmup_iters=W iter_ms_mean=X ...";
see workloads/corpus/README.md.  A launched run is compared with
iter_ms_mean; an attached run with the mean of the "ms/iter" lines that
arrived inside the attach window (each line is stamped with
CLOCK_MONOTONIC, the trace's clock, when the harness reads it).  The
trainer prints only its final summary: elapsed_s / measured_steps; attached,
its --warmup and --steps are sized from the launched run's speed so that
its timed steps are about those of the attach window (a note gives both
spans), and the report's steps are compared over the span that ends when
its summary line arrives and lasts elapsed_s.  Attached rows compare the
report's steps inside the span the job's own timing covers.

Every process is started with a timeout and ended with its descendants
(by pid) when it runs over, when the harness ends, or when the harness is
killed (PR_SET_PDEATHSIG); on SIGTERM/SIGINT the rows so far are printed.

Exit status: 0 every row passed, 1 some row failed, 2 bad usage, 77 nothing
could run here (not root, or no Python with torch): ctest's skip code.
"""
import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import process_checks
import rank_checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "workloads", "corpus")

OWN_TOLERANCE = 0.05      # mean step vs the job's own iteration time
ATTACH_TOLERANCE = 0.03   # launched vs attached
STEP_COUNT_TOLERANCE = 1  # annotated vs un-annotated
# How the repeating kernel sequence's report names a left-out unit that holds
# less work than the steady iteration (agent/analysis/repeating_sequence.cc),
# and how steps from marks name the extra work cut off the iteration after
# it (agent/analysis/step_extra_work.cc): neither is an iteration.
LESS_WORK_THAN_AN_ITERATION = "less work than the steady iteration"
EXTRA_CUT_OFF_AN_ITERATION = "measured on its own"
MIN_STEPS = 3
# One cause named two ways by a run with the Python hook's ranges and one
# without (a batch loaded in the training thread; worker processes that are
# not a DataLoader's; see same_finding): their scores may differ this much
# (points of step time).
PAIRED_FINDING_SCORE_TOLERANCE = 5.0

# Sizes per profile.  cpu: a few seconds each on a 2-core machine (CI);
# gpu: realistic loads on one H100/H200.  "run" is appended for launched
# runs (a fixed iteration count, so that annotated and un-annotated runs do
# the same work); attached runs get "--seconds" instead and are stopped
# once the attach is over ("attach_s": how long, where the profile's
# default window is too short for the job's rhythm).
PROFILES = {
    "cpu": {
        "imagenet_resnet": {
            "args": ["--device", "cpu", "--arch", "resnet18", "--image-size", "32", "-b", "8", "-j", "2",
                     "--num-classes", "10", "--lr", "0.01", "--print-freq", "5"],
            "iters": 40},
        "imagenet_thread_prefetch": {
            "script": "imagenet_resnet",
            "args": ["--device", "cpu", "--arch", "resnet18", "--image-size", "32", "-b", "8", "-j", "2",
                     "--num-classes", "10", "--lr", "0.01", "--print-freq", "5", "--prefetch", "thread"],
            "iters": 40},
        "word_lm_lstm": {
            "args": ["--device", "cpu", "--vocab", "1000", "--train-tokens", "16000", "--valid-tokens", "2000",
                     "--emsize", "64", "--nhid", "64", "--batch-size", "8", "--bptt", "20",
                     "--log-interval", "10"],
            "iters": 130},
        "grad_accum_eval": {
            "args": ["--device", "cpu", "--micro-batch", "8", "--seq-len", "32", "--vocab", "500",
                     "--d-model", "32", "--nhead", "4", "--layers", "1", "--train-size", "4000",
                     "--val-size", "128", "--accum-steps", "3", "--workers", "1", "--eval-every", "10",
                     "--ckpt-every", "25", "--log-every", "5"],
            "iters": 40},
        "amp_scaler": {
            "args": ["--device", "cpu", "--batch-size", "64", "--in-size", "256", "--hidden", "256",
                     "--out-size", "256", "--num-batches", "8", "--log-every", "20"],
            "iters": 200},
        "compiled_mlp": {
            "args": ["--device", "cpu", "--batch-size", "32", "--hidden", "128", "--log-every", "25"],
            "iters": 200},
        "cpu_manual_sgd": {
            "args": ["--device", "cpu", "--samples", "20000", "--features", "64", "--hidden", "128",
                     "--batch-size", "64", "--log-every", "50"],
            "iters": 1000},
        "mnist_hogwild": {
            "processes": 2,
            "args": ["--device", "cpu", "--num-processes", "2", "--workers", "1", "--dataset-size", "4096",
                     "--log-interval", "10"],
            "iters": 150},
        "ppo_rollout": {
            "args": ["--device", "cpu", "--log-every", "3"],
            "iters": 30},
        "dqn_replay": {
            "args": ["--device", "cpu", "--learning-starts", "500", "--log-every", "25"],
            "iters": 200},
        "batch_inference": {
            "args": ["--device", "cpu", "--arch", "small", "--image-size", "32", "-b", "16", "-j", "1",
                     "--num-classes", "10", "--log-every", "10"],
            "iters": 80},
        "diffusion_ema": {
            "args": ["--device", "cpu", "--resolution", "16", "--channels", "16", "--levels", "2",
                     "--train-batch-size", "8", "--workers", "1", "--dataset-size", "4000", "--sample-every", "40",
                     "--sample-steps", "10", "--eval-batch-size", "4", "--log-every", "10"],
            "iters": 150},
        "moe_router": {
            "args": ["--device", "cpu", "--vocab", "500", "--block-size", "32", "--batch-size", "8", "--n-layer", "2",
                     "--n-embd", "32", "--n-head", "2", "--experts", "4", "--train-tokens", "20000",
                     "--log-every", "10"],
            "iters": 150},
        "dcgan": {
            "args": ["--device", "cpu", "--image-size", "32", "--ngf", "16", "--ndf", "16", "--batch-size", "16",
                     "--workers", "1", "--dataset-size", "4000", "--log-every", "10"],
            "iters": 60},
        "checkpointed_lm": {
            "args": ["--device", "cpu", "--batch-size", "4", "--block-size", "64", "--vocab", "500",
                     "--d-model", "64", "--n-head", "4", "--n-layer", "3", "--train-blocks", "2000",
                     "--workers", "1", "--log-every", "10"],
            "iters": 40},
        "sam_sharpness": {
            "args": ["--device", "cpu", "--width", "1", "--depth", "1", "--image-size", "16", "--batch-size", "32",
                     "--train-size", "2048", "--log-every", "10"],
            "iters": 100},
        "sam_closure": {
            "script": "sam_sharpness",
            "args": ["--device", "cpu", "--width", "1", "--depth", "1", "--image-size", "16", "--batch-size", "32",
                     "--train-size", "2048", "--log-every", "10", "--closure"],
            "iters": 100},
        "maml_fewshot": {
            "args": ["--device", "cpu", "--channels", "16", "--image-size", "14", "--tasks", "4", "--inner-steps", "1",
                     "--eval-every", "20", "--eval-tasks", "8", "--eval-inner-steps", "5", "--log-every", "10"],
            "iters": 80},
        "ddp_tutorial": {
            "ranks": 2,
            "args": ["--device", "cpu", "--in-dim", "64", "--hidden", "128", "--layers", "2", "--num-classes", "10",
                     "--batch-size", "32", "--dataset-size", "4096", "--val-size", "512", "--workers", "1",
                     "--grad-accum", "2", "--log-every", "10"],
            "iters": 120},
        "ddp_spawn": {
            "script": "ddp_tutorial", "ranks": 2, "launcher": "spawn",
            "args": ["--device", "cpu", "--in-dim", "64", "--hidden", "128", "--layers", "2", "--num-classes", "10",
                     "--batch-size", "32", "--dataset-size", "4096", "--val-size", "512", "--workers", "1",
                     "--log-every", "10"],
            "iters": 120},
        "seq2seq_attention": {
            "args": ["--device", "cpu", "--vocab", "500", "--hidden-size", "128", "--pairs", "2000",
                     "--print-every", "25"],
            "iters": 250},
        "pinn_lbfgs": {
            "args": ["--device", "cpu", "--layers", "6", "--n-f", "500", "--log-every", "15"],
            "iters": 150},
        "kfold_cv": {
            "args": ["--device", "cpu", "--rows", "8000", "--features", "32", "--hidden", "64", "--batch-size", "64",
                     "--workers", "1", "--folds", "3", "--epochs", "2", "--log-every", "25"],
            # Ends inside an epoch: a new fold's optimizer that has stepped
            # fewer than 5 times when the trace ends has not taken over yet.
            "iters": 480},
        "fixmatch_semisup": {
            # Restarts the labeled loader every 25 iterations, the unlabeled
            # one every 50, an evaluation and checkpoint every 100.
            "args": ["--device", "cpu", "--num-labeled", "100", "--num-unlabeled", "400", "--num-test", "128",
                     "--batch-size", "4", "--mu", "2", "--width", "1", "--workers", "1", "--eval-step", "100",
                     "--print-freq", "10"],
            "iters": 300},
        "yolo_multiscale": {
            # 4 batches (32 to 96 px) an optimizer step, 10 steps an epoch,
            # each epoch followed by a validation and a checkpoint.  No
            # warm-up ramp of the batches an update takes: its short first
            # updates would count in the report's mean, not the script's.
            "args": ["--device", "cpu", "--img-size", "64", "--batch-size", "16", "--dataset-size", "640",
                     "--val-size", "64", "--width", "8", "--workers", "1", "--warmup-batches", "0",
                     "--log-every", "5"],
            "iters": 100},
        "threaded_loop": {
            # The loop on a thread of its own; a checkpoint staged every 40
            # iterations and written on another thread.
            "args": ["--device", "cpu", "--features", "64", "--hidden", "128", "--blocks", "2", "--num-classes", "10",
                     "--batch-size", "64", "--dataset-size", "4000", "--workers", "1", "--ckpt-every", "40",
                     "--log-every", "10"],
            "iters": 200},
        "lightning_loop": {
            # Forward and backward inside optimizer.step(closure); workers
            # forked again each epoch (31 steps); a validation every 25.
            "args": ["--device", "cpu", "--image-size", "16", "--width", "8", "--batch-size", "32",
                     "--train-size", "2000", "--val-size", "256", "--workers", "1", "--val-check-interval", "25",
                     "--log-every", "10"],
            "iters": 200},
        "lightning_accum": {
            # 3 batches a step: two closures called, the third inside the step.
            "script": "lightning_loop",
            "args": ["--device", "cpu", "--image-size", "16", "--width", "8", "--batch-size", "32",
                     "--train-size", "2000", "--val-size", "256", "--workers", "1", "--val-check-interval", "25",
                     "--accumulate-grad-batches", "3", "--log-every", "5"],
            "iters": 80},
        "trainer": {
            "args": ["--device", "cpu", "--model", "mlp", "--hidden", "256", "--layers", "2",
                     "--batch-size", "64", "--workers", "2", "--warmup", "5"],
            "iters": 300},
    },
    "gpu": {
        "imagenet_resnet": {
            "args": ["--device", "cuda", "--arch", "resnet18", "-b", "64", "-j", "4", "--print-freq", "10"],
            "iters": 200},
        "imagenet_short_epochs": {
            "script": "imagenet_resnet",
            "args": ["--device", "cuda", "--arch", "resnet18", "-b", "64", "-j", "4", "--print-freq", "10",
                     "--dataset-size", "1280"],
            # Each epoch's restart is a 0.3-0.6 s step: a 10 s window's edges,
            # cutting one, move the attached mean by 4%.
            "attach_s": 30,
            "iters": 200},
        "imagenet_stream_prefetch": {
            "script": "imagenet_resnet",
            "args": ["--device", "cuda", "--arch", "resnet18", "-b", "64", "-j", "4", "--print-freq", "10",
                     "--prefetch", "stream"],
            "iters": 200},
        "imagenet_thread_prefetch": {
            "script": "imagenet_resnet",
            "args": ["--device", "cuda", "--arch", "resnet18", "-b", "64", "-j", "4", "--print-freq", "10",
                     "--prefetch", "thread"],
            "iters": 200},
        "word_lm_lstm": {
            "args": ["--device", "cuda", "--train-tokens", "400000", "--log-interval", "50"],
            "iters": 800},
        "grad_accum_eval": {
            "args": ["--device", "cuda", "--accum-steps", "4", "--val-size", "4096", "--eval-every", "25",
                     "--ckpt-every", "100",
                     "--log-every", "10"],
            "iters": 200},
        "amp_scaler": {
            "args": ["--device", "cuda", "--log-every", "100"],
            "iters": 4000},
        "compiled_mlp": {
            "args": ["--device", "cuda", "--compile-mode", "reduce-overhead", "--log-every", "200"],
            "iters": 3000},
        "compiled_mlp_default": {
            "script": "compiled_mlp",
            "args": ["--device", "cuda", "--compile-mode", "default", "--log-every", "200"],
            "iters": 3000},
        "compiled_optimizer": {
            "script": "compiled_mlp",
            "args": ["--device", "cuda", "--compile-mode", "default", "--compile-optimizer", "graph",
                     "--log-every", "200"],
            "iters": 3000},
        "cpu_manual_sgd": {
            "args": ["--device", "cpu", "--log-every", "100"],
            "iters": 2000},
        "mnist_hogwild": {
            "processes": 4,
            "args": ["--device", "cuda", "--num-processes", "4", "--workers", "1", "--log-interval", "20"],
            "iters": 600},
        "ppo_rollout": {
            "args": ["--device", "cuda", "--num-envs", "8", "--log-every", "5"],
            "iters": 60},
        "ppo_subproc_envs": {
            "script": "ppo_rollout",
            "args": ["--device", "cuda", "--num-envs", "8", "--vec-env", "subproc", "--frame-skip", "4",
                     "--log-every", "5"],
            "iters": 40},
        "ppo_slow_envs": {
            "script": "ppo_rollout",
            "args": ["--device", "cuda", "--num-envs", "8", "--vec-env", "subproc", "--frame-skip", "200",
                     "--log-every", "1"],
            "iters": 20},
        "dqn_replay": {
            "args": ["--device", "cuda", "--log-every", "50"],
            "iters": 1000},
        "batch_inference": {
            "args": ["--device", "cuda", "-b", "128", "-j", "4", "--log-every", "20"],
            "iters": 300},
        "batch_inference_inline": {
            "script": "batch_inference",
            "args": ["--device", "cuda", "-b", "128", "-j", "0", "--log-every", "20"],
            "iters": 200},
        "diffusion_ema": {
            "args": ["--device", "cuda", "--log-every", "20"],
            "iters": 500},
        "diffusion_ema_foreach": {
            "script": "diffusion_ema",
            "args": ["--device", "cuda", "--ema-foreach", "--log-every", "20"],
            "iters": 500},
        "moe_router": {
            "args": ["--device", "cuda", "--log-every", "20"],
            "iters": 400},
        "moe_capacity": {
            "script": "moe_router",
            "args": ["--device", "cuda", "--dispatch", "capacity", "--log-every", "20"],
            "iters": 400},
        "dcgan": {
            "args": ["--device", "cuda", "--workers", "4", "--log-every", "20"],
            "iters": 600},
        "wgan_gp": {
            "script": "dcgan",
            "args": ["--device", "cuda", "--workers", "4", "--n-critic", "5", "--gradient-penalty", "10",
                     "--log-every", "20"],
            "iters": 200},
        "wgan_critic": {
            "script": "dcgan",
            "args": ["--device", "cuda", "--workers", "4", "--n-critic", "5", "--log-every", "20"],
            "iters": 200},
        "checkpointed_lm": {
            "args": ["--device", "cuda", "--log-every", "20"],
            "iters": 300},
        "lm_dynamic_padding": {
            "script": "checkpointed_lm",
            "args": ["--device", "cuda", "--checkpoint", "none", "--dynamic-padding", "--log-every", "20"],
            "iters": 400},
        "lm_empty_cache": {
            "script": "checkpointed_lm",
            "args": ["--device", "cuda", "--checkpoint", "none", "--empty-cache", "--log-every", "20"],
            "iters": 300},
        "checkpointed_lm_empty_cache": {
            "script": "checkpointed_lm",
            "args": ["--device", "cuda", "--empty-cache", "--log-every", "20"],
            "iters": 300},
        "checkpointed_lm_nonreentrant": {
            "script": "checkpointed_lm",
            "args": ["--device", "cuda", "--checkpoint", "nonreentrant", "--log-every", "20"],
            "iters": 300},
        "sam_sharpness": {
            "args": ["--device", "cuda", "--log-every", "20"],
            "iters": 400},
        "sam_closure": {
            "script": "sam_sharpness",
            "args": ["--device", "cuda", "--log-every", "20", "--closure"],
            "iters": 400},
        "maml_fewshot": {
            "args": ["--device", "cuda", "--tasks", "4", "--log-every", "5", "--eval-every", "50"],
            "iters": 200},
        "maml_first_order": {
            "script": "maml_fewshot",
            "args": ["--device", "cuda", "--first-order", "--tasks", "4", "--inner-steps", "1", "--log-every", "20"],
            "iters": 600},
        "ddp_tutorial": {
            "ranks": 2,
            "args": ["--device", "cuda", "--grad-accum", "2", "--workers", "4", "--log-every", "20"],
            "iters": 400},
        "ddp_spawn": {
            "script": "ddp_tutorial", "ranks": 2, "launcher": "spawn",
            "args": ["--device", "cuda", "--workers", "4", "--log-every", "20"],
            "iters": 400},
        "seq2seq_attention": {
            "args": ["--device", "cuda", "--print-every", "100"],
            "iters": 1500},
        "pinn_lbfgs": {
            "args": ["--device", "cuda", "--log-every", "100"],
            "iters": 1500},
        "kfold_cv": {
            "args": ["--device", "cuda", "--log-every", "50"],
            "iters": 2000},
        "fixmatch_semisup": {
            "args": ["--device", "cuda", "--eval-step", "200", "--print-freq", "20"],
            "iters": 600},
        "yolo_multiscale": {
            "args": ["--device", "cuda", "--warmup-batches", "0", "--log-every", "10"],
            "iters": 400},
        "threaded_loop": {
            "args": ["--device", "cuda", "--workers", "4", "--log-every", "20"],
            "iters": 600},
        "lightning_loop": {
            "args": ["--device", "cuda", "--workers", "4", "--log-every", "20"],
            "iters": 600},
        "lightning_accum": {
            "script": "lightning_loop",
            "args": ["--device", "cuda", "--workers", "4", "--accumulate-grad-batches", "4", "--log-every", "10"],
            "iters": 200},
        "trainer": {
            "args": ["--device", "cuda", "--model", "cnn", "--batch-size", "64", "--workers", "4",
                     "--pin-memory", "--non-blocking", "--image-size", "3x64x64", "--warmup", "5"],
            "iters": 600},
    },
}

# How long an attached run waits for the job's warm-up (periodic lines
# seen), how long it attaches, and the limits on everything.
ATTACH = {
    "cpu": {"warm_lines": 2, "duration_s": 3, "warm_timeout_s": 60, "trainer_warm_s": 1.5},
    "gpu": {"warm_lines": 3, "duration_s": 10, "warm_timeout_s": 240, "trainer_warm_s": 5},
}
RUN_TIMEOUT_S = {"cpu": 120, "gpu": 300}
REPORT_TIMEOUT_S = 180

MS_PER_ITER = re.compile(r"([0-9]+(?:\.[0-9]+)?) ms/iter")
# A job whose training loop runs on a thread other than its main thread says which.
LOOP_TID = re.compile(r"^loop thread tid (\d+)$")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------ processes
def descendants(pid):
    """Every live descendant of pid, found through /proc (children first-level
    and further), so that a tree can be ended by its ids."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc, first_signal=signal.SIGTERM, grace_s=3.0):
    """Ends a process we started and everything under it: first_signal to the
    whole tree, then SIGKILL to whatever is left after grace_s."""
    if proc.poll() is not None and not descendants(proc.pid):
        return
    pids = [proc.pid] + descendants(proc.pid)
    for p in pids:
        try:
            os.kill(p, first_signal)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    for p in [proc.pid] + descendants(proc.pid) + pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


def die_with_harness():
    """preexec_fn: the child gets SIGTERM when the harness dies (ctest's
    timeout kills it), so no job outlives it; gpuos-trace forwards the
    signal to the command it started."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


LIVE_JOBS = set()


def end_live_jobs():
    for job in list(LIVE_JOBS):
        kill_tree(job.proc, grace_s=1.0)


class Interrupted(Exception):
    """SIGTERM/SIGINT/SIGHUP: stop, end the jobs, print the rows so far."""


def on_signal(signum, frame):
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)  # once: the clean-up must not be cut short
    raise Interrupted(signal.Signals(signum).name)


class Job:
    """A process whose stdout lines are read as they come and stamped with
    CLOCK_MONOTONIC (time.monotonic_ns, the clock of the trace)."""

    def __init__(self, argv, log_path, env=None):
        self.lines = []  # (monotonic_ns, text)
        self.cond = threading.Condition()
        self.log_path = log_path
        self.err = open(log_path + ".stderr", "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True, preexec_fn=die_with_harness)
        LIVE_JOBS.add(self)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.log_path, "w") as out:
            for raw in self.proc.stdout:
                stamp = time.monotonic_ns()
                text = raw.decode(errors="replace").rstrip("\n")
                out.write("%d %s\n" % (stamp, text))
                out.flush()
                with self.cond:
                    self.lines.append((stamp, text))
                    self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def timing_lines(self):
        with self.cond:
            return timing_lines(self.lines)

    def wait_for(self, predicate, timeout_s):
        """Waits until predicate(lines) holds, the job exits or timeout_s passes."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not predicate(self.lines):
                if self.proc.poll() is not None and not self.reader.is_alive():
                    return predicate(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.2))
            return True

    def finish(self, timeout_s):
        """Waits for the job to exit; kills its tree after timeout_s.  Returns
        (exit status or None when it had to be killed)."""
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            rc = None
        self.reader.join(timeout=10)
        self.err.close()
        LIVE_JOBS.discard(self)
        return rc

    def stop(self):
        kill_tree(self.proc)
        self.reader.join(timeout=10)
        self.err.close()
        LIVE_JOBS.discard(self)

    def stderr_tail(self, n=3):
        try:
            with open(self.log_path + ".stderr", errors="replace") as f:
                return " | ".join(line.strip() for line in f.read().splitlines()[-n:])
        except OSError:
            return ""


def loop_tid(lines):
    """The tid of the job's loop thread where it printed one, else None."""
    return next((int(m.group(1)) for _, text in lines for m in [LOOP_TID.match(text)] if m), None)


def timing_lines(lines):
    """[(monotonic_ns, ms)] of the "<X> ms/iter" lines among (monotonic_ns, text)."""
    return [(t, float(m.group(1))) for t, s in lines for m in [MS_PER_ITER.search(s)] if m]


def run_report(trace, trace_file, work, name):
    """gpuos-trace report --format json; returns (dict or None, error text)."""
    out_path = os.path.join(work, name + ".report.json")
    try:
        with open(out_path, "w") as out, open(out_path + ".stderr", "w") as err:
            rc = subprocess.run([trace, "report", trace_file, "--format", "json"], stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, timeout=REPORT_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        return None, "report timed out after %ds" % REPORT_TIMEOUT_S
    if rc != 0:
        with open(out_path + ".stderr", errors="replace") as f:
            return None, "report exited %d: %s" % (rc, f.read().strip()[-200:])
    try:
        with open(out_path) as f:
            return json.load(f), ""
    except ValueError as e:
        return None, "report is not JSON: %s" % e


# -------------------------------------------------------------- the jobs
def script_argv(python, spec, name, extra):
    script = os.path.join(CORPUS, spec.get("script", name) + ".py")
    return [python, script] + spec["args"] + extra


def parse_result(lines):
    """The key=value pairs of the last RESULT line, or of gpuos-trainer's summary line."""
    for _, text in reversed(lines):
        if text.startswith("RESULT ") or text.startswith("gpuos-trainer:"):
            pairs = dict(kv.split("=", 1) for kv in text.split() if "=" in kv)
            return pairs
    return {}


def own_ms_from_result(result):
    if "iter_ms_mean" in result:
        return float(result["iter_ms_mean"])
    if "elapsed_s" in result and "measured_steps" in result and float(result["measured_steps"]) > 0:
        return 1000.0 * float(result["elapsed_s"]) / float(result["measured_steps"])
    return None


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30, text=True).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def trainer_has_no_nvtx(trainer):
    try:
        out = subprocess.run([trainer, "--help"], capture_output=True, timeout=30, text=True)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--no-nvtx" in out.stdout + out.stderr


# (script, mode, check) regexes and why: checks that fail for a reason
# the project knows and has not fixed yet (--known-gaps FILE, one
# "SCRIPT_RE MODE_RE CHECK_RE  # why" a line).  They are printed as GAP
# lines; every other check still fails the run.
KNOWN_GAPS = []


def load_known_gaps(path):
    for line in open(path):
        body, _, why = line.partition("#")
        fields = body.split()
        if not fields:
            continue
        if len(fields) != 3:
            raise SystemExit("check_corpus: %s: want SCRIPT_RE MODE_RE CHECK_RE  # why: %r" % (path, line))
        KNOWN_GAPS.append(tuple(re.compile(f) for f in fields) + (why.strip() or "unexplained",))


class Row:
    def __init__(self, script, mode):
        self.script, self.mode = script, mode
        self.failures = []   # "check: reason"
        self.gaps = []       # failures listed in --known-gaps: printed, not failing
        self.notes = []
        self.report = None
        self.own_ms = None
        self.iters = None
        self.skipped = ""
        self.seconds = None
        self.job_pid = None  # attached: the pid attached to
        self.own_span = None  # attached: (start_ns, end_ns) the job's own timing covers
        self.rank_own = {}    # multi-rank jobs: {rank: its own mean iteration ms}
        self.rank_sync_wait = {}  # {rank: ms a step it waited in its own sync points (RESULT's sync_wait_ms_per_iter)}
        self.process_own = {}  # jobs of several training processes: {P: its own mean iteration ms}
        self.process_pid = {}  # {P: its pid}
        self.process_span = {}  # attached: {P: (start_ns, end_ns) its own timing covers}
        self.process_lines = {}  # attached: {P: [(monotonic_ns, ms)] its timing lines}
        self.process_warmup = {}  # launched: {P: the iterations its own mean leaves out (RESULT's warmup_iters)}
        self.own_by_process = False  # the own check ran process by process (process_checks.py)
        self.loop_tid = None  # the thread the job says runs its loop, where not its main thread

    def fail(self, check, reason):
        for script_re, mode_re, check_re, why in KNOWN_GAPS:
            if script_re.fullmatch(self.script) and mode_re.fullmatch(self.mode) and check_re.fullmatch(check):
                self.gaps.append("%s: %s (known gap: %s)" % (check, reason, why))
                return
        self.failures.append("%s: %s" % (check, reason))

    @property
    def steps(self):
        return self.report["step_analysis"] if self.report else {}

    @property
    def mean_ms(self):
        """The report's mean measured step; attached, over the steps inside
        the span the job's own timing covers (a shared machine's speed
        drifts within the attach window)."""
        d = self.steps.get("duration_ns")
        if not d or not self.steps.get("measured_steps"):
            return None
        inside = self.steps_in_own_span()
        if inside is not None and len(inside) >= MIN_STEPS:
            return sum(st["duration_ns"] for st in inside) / len(inside) / 1e6
        return d["mean"] / 1e6

    def steps_in_own_span(self):
        if not self.own_span or not self.report:
            return None
        lo, hi = self.own_span
        include_left_out = self.steps.get("summary_includes_warmup")
        return [st for st in self.report.get("steps") or []
                if (include_left_out or not st.get("warmup")) and st["start_ns"] >= lo and st["end_ns"] <= hi]

    @property
    def diagnosis(self):
        return (self.report or {}).get("diagnosis", {}).get("bottleneck")

    def to_json(self):
        return {
            "script": self.script, "mode": self.mode, "passed": not self.failures and not self.skipped,
            "skipped": self.skipped, "failures": self.failures, "notes": self.notes,
            "source": self.steps.get("source"), "steps": self.steps.get("steps"),
            "measured_steps": self.steps.get("measured_steps"), "note": self.steps.get("note"),
            "thread_comm": self.steps.get("thread_comm"),
            "mean_step_ms": self.mean_ms, "own_iter_ms": self.own_ms, "script_iters": self.iters,
            "diagnosis": self.diagnosis, "seconds": self.seconds,
            "diagnosis_evidence": (self.report or {}).get("diagnosis", {}).get("evidence"),
        }


class Harness:
    def __init__(self, args):
        self.args = args
        self.trace = args.trace
        self.python = args.python
        self.trainer = args.trainer
        self.work = args.work
        self.profile = args.profile
        self.rows = []

    def env(self):
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    # ---- one launched run (modes launched, nohooks, nonvtx)
    def launched(self, name, spec, mode):
        row = Row(name, mode)
        tag = "%s.%s" % (name, mode)
        trace_file = os.path.join(self.work, tag + ".gpuos")
        opts = ["-q", "-o", trace_file]
        if mode == "nohooks":
            opts.insert(0, "--no-python-hooks")
        if name == "trainer":
            extra = ["--steps", str(spec["iters"])] + (["--no-nvtx"] if mode == "nonvtx" else [])
            argv = [self.trainer] + spec["args"] + extra
        else:
            argv = self.job_argv(spec, name, ["--iters", str(spec["iters"])])
        log("== %s %s: %s" % (name, mode, " ".join(argv)))
        job = Job([self.trace] + opts + ["--"] + argv, os.path.join(self.work, tag + ".log"), self.env())
        rc = job.finish(RUN_TIMEOUT_S[self.profile])
        result = self.own_results(row, spec, job.lines)
        row.loop_tid = loop_tid(job.lines)
        row.own_ms = own_ms_from_result(result)
        row.iters = int(result.get("iters", result.get("steps", 0)) or 0) or None
        if rc is None:
            row.fail("run", "timed out after %ds (killed)" % RUN_TIMEOUT_S[self.profile])
        elif rc != 0:
            row.fail("run", "exit status %d: %s" % (rc, job.stderr_tail()))
        elif row.own_ms is None:
            row.fail("run", "no RESULT/summary line on stdout")
        self.read_report(row, trace_file, tag)
        return row

    # ---- one attached run
    def attached(self, name, spec, launched_row, mode="attached"):
        row = Row(name, mode)
        tag = "%s.%s" % (name, mode)
        trace_file = os.path.join(self.work, tag + ".gpuos")
        cfg = ATTACH[self.profile]
        duration = spec.get("attach_s", cfg["duration_s"])
        if name == "trainer":
            # Its only timing is the final summary, over the steps after
            # --warmup: sized from the launched run's speed so that the
            # warm-up lasts until the attach and the run ends with it, the
            # timed steps are those of the attach window (about: the attach
            # takes a moment to start, and the job may run faster untraced).
            ms = (launched_row.own_ms if launched_row and launched_row.own_ms else None) or 20.0
            warm_steps = int(cfg["trainer_warm_s"] * 1000 / ms) + 1
            steps = warm_steps + int(duration * 1000 / ms) + 1
            args = list(spec["args"])
            if "--warmup" in args:
                del args[args.index("--warmup"):args.index("--warmup") + 2]
            argv = [self.trainer] + args + ["--warmup", str(warm_steps), "--steps", str(steps)]
        else:
            argv = self.job_argv(spec, name, ["--seconds", "600"])
        log("== %s %s: %s" % (name, mode, " ".join(argv)))
        job = Job(argv, os.path.join(self.work, tag + ".log"), self.env())
        row.job_pid = job.proc.pid
        try:
            if name == "trainer":
                time.sleep(cfg["trainer_warm_s"])
                warm = job.proc.poll() is None
            else:
                # Every rank of a multi-rank job logs its own lines.
                warm_lines = cfg["warm_lines"] * spec.get("ranks", spec.get("processes", 1))
                warm = job.wait_for(lambda lines: sum(1 for _, s in lines if MS_PER_ITER.search(s))
                                    >= warm_lines, cfg["warm_timeout_s"])
            if not warm:
                row.fail("run", "the job did not warm up (%s): %s" % (
                    "exited" if job.proc.poll() is not None else "timeout", job.stderr_tail()))
                job.stop()
                return row
            try:
                with open(os.path.join(self.work, tag + ".trace.stderr"), "w") as err:
                    trc = subprocess.run([self.trace, "-q"] + (["--no-inject"] if mode == "uprobes" else []) +
                                         ["--pid", str(job.proc.pid), "--duration",
                                          "%ds" % duration, "-o", trace_file], stdout=err, stderr=err,
                                         stdin=subprocess.DEVNULL, timeout=duration + 90,
                                         preexec_fn=die_with_harness).returncode
            except subprocess.TimeoutExpired:
                trc = None
            if trc != 0:
                with open(os.path.join(self.work, tag + ".trace.stderr"), errors="replace") as f:
                    row.fail("run", "gpuos-trace --pid %s: %s" % (
                        "timed out" if trc is None else "exit status %d" % trc, f.read().strip()[-200:]))
            if name == "trainer":
                rc = job.finish(RUN_TIMEOUT_S[self.profile])
                if rc != 0:
                    row.fail("run", "the trainer %s after the attach: %s" % (
                        "was killed (timeout)" if rc is None else "exited %d" % rc, job.stderr_tail()))
                row.own_ms = own_ms_from_result(parse_result(job.lines))
                row.notes.append("own timing: the trainer's steps after its --warmup, sized to end with "
                                 "the attach (it has no periodic output)")
            else:
                after = time.monotonic_ns()
                alive = job.wait_for(lambda lines: any(t > after and MS_PER_ITER.search(s) for t, s in lines), 60)
                if not alive:
                    row.fail("run", "the job logged no iteration after the attach ended (%s)" % (
                        "it exited %s" % job.proc.poll() if job.proc.poll() is not None else "hung"))
        finally:
            if job.proc.poll() is None:
                job.stop()
            else:
                job.finish(10)
        row.loop_tid = loop_tid(job.lines)
        self.read_report(row, trace_file, tag)
        if name != "trainer" and row.report and "ranks" in spec:
            for rank, lines in rank_checks.lines_by_rank(job.lines).items():
                own, span = self.own_ms_in_window(timing_lines(lines), row.report)
                row.rank_own[rank] = own
                if rank == 0:
                    row.own_ms, row.own_span = own, span
            row.notes.append("ranks' own timing: their lines inside the window; the ranks' mean steps are over "
                             "the whole window")
        elif name != "trainer" and row.report and "processes" in spec:
            row.process_pid = process_checks.pids(job.lines)
            for p, lines in process_checks.lines_by_process(job.lines).items():
                row.process_lines[p] = timing_lines(lines)
                row.process_own[p], row.process_span[p] = self.own_ms_in_window(row.process_lines[p], row.report)
            row.notes.append("processes' own timing: their lines inside the window")
        elif name != "trainer" and row.report:
            row.own_ms, row.own_span = self.own_ms_in_window(job.timing_lines(), row.report)
            inside = row.steps_in_own_span()
            if inside is not None:
                row.notes.append("mean step over the %d measured steps inside the span of the job's own timing "
                                 "lines (%s)" % (len(inside), "used" if len(inside) >= MIN_STEPS
                                                  else "too few: the whole window's mean is used"))
        if name == "trainer" and row.report and row.report.get("attach"):
            timed = float(parse_result(job.lines).get("elapsed_s", 0) or 0)
            window = (row.report["attach"]["end_ns"] - row.report["attach"]["start_ns"]) / 1e9
            row.notes.append("the trainer's timed steps took %.2f s, the attach window %.2f s" % (timed, window))
            # Its timed steps end where it prints its summary: the report's
            # steps are compared over that span.
            printed = next((t for t, text in reversed(job.lines) if text.startswith("gpuos-trainer:")), None)
            if printed and timed > 0:
                row.own_span = (printed - int(timed * 1e9), printed)
                inside = row.steps_in_own_span()
                row.notes.append("mean step over the %d measured steps inside the trainer's timed span (%s)" % (
                    len(inside), "used" if len(inside) >= MIN_STEPS else "too few: the whole window's mean is used"))
        return row

    def own_ms_in_window(self, lines, report):
        """The mean of the job's "ms/iter" lines whose whole interval (from the
        previous such line) lies inside the attach window, and the span those
        intervals cover: (mean, (start_ns, end_ns)), or (None, None)."""
        attach = report.get("attach") or {}
        lo, hi = attach.get("start_ns"), attach.get("end_ns")
        if not lo or not hi:
            return None, None
        inside = [(t0, t1, ms) for (t0, _), (t1, ms) in zip(lines, lines[1:]) if t0 >= lo and t1 <= hi]
        if not inside:
            return None, None
        return sum(ms for _, _, ms in inside) / len(inside), (inside[0][0], inside[-1][1])

    def job_argv(self, spec, name, extra):
        argv = script_argv(self.python, spec, name, extra)
        return rank_checks.launcher_argv(self.python, spec, argv) if "ranks" in spec else argv

    def own_results(self, row, spec, lines):
        """The RESULT pairs of the job (of rank 0 in a multi-rank job, whose
        every rank's own mean goes to row.rank_own)."""
        if "processes" in spec:
            row.process_pid = process_checks.pids(lines)
            by_process = process_checks.lines_by_process(lines)
            for p, process_lines in by_process.items():
                result = parse_result(process_lines)
                row.process_own[p] = own_ms_from_result(result)
                row.process_warmup[p] = int(result.get("warmup_iters", 0) or 0)
            missing = [p for p in range(spec["processes"]) if row.process_own.get(p) is None]
            if missing:
                row.fail("run", "processes %s printed no RESULT line" % missing)
            return parse_result(by_process.get(0, []))
        if "ranks" not in spec:
            return parse_result(lines)
        by_rank = rank_checks.lines_by_rank(lines)
        for rank, rank_lines in by_rank.items():
            result = parse_result(rank_lines)
            row.rank_own[rank] = own_ms_from_result(result)
            if result.get("sync_wait_ms_per_iter") is not None and result.get("device") == "cuda":
                row.rank_sync_wait[rank] = float(result["sync_wait_ms_per_iter"])
        missing = [r for r in range(spec["ranks"]) if row.rank_own.get(r) is None]
        if missing:
            row.fail("run", "ranks %s printed no RESULT line" % missing)
        return parse_result(by_rank.get(0, []))

    def read_report(self, row, trace_file, tag):
        if not os.path.exists(trace_file):
            row.fail("run", "no trace file")
            return
        report, err = run_report(self.trace, trace_file, self.work, tag)
        if report is None:
            row.fail("run", err)
            return
        row.report = report

    # ---- checks
    def check_row(self, row, spec):
        if row.report is None:
            return
        if "ranks" in spec:
            rank_checks.check(row, spec, self.check_steps)
        elif "processes" in spec:
            # The row shows the own timing of the process whose steps are the report's own.
            own_pid = (row.report.get("step_analysis") or {}).get("pid")
            p = next((p for p, pid in row.process_pid.items() if pid == own_pid), None)
            if row.process_own.get(p) is not None:
                row.own_ms = row.process_own[p]
            process_checks.check(row, spec, self.check_steps)
        else:
            self.check_steps(row)

    def check_steps(self, row):
        """The report's own steps: found, on the job's main thread (a rank's
        main thread in a multi-rank job), as long as the job's own."""
        st = row.steps
        source = st.get("source")
        measured = st.get("measured_steps") or 0
        if source in ("fixed_windows", "none", None):
            row.fail("steps", "%s: %s" % (source, st.get("note", "")))
        elif measured < MIN_STEPS:
            row.fail("steps", "only %d measured steps (%s)" % (measured, source))
        if source not in ("none", None):
            processes = row.report.get("processes", [])
            job_pid = row.job_pid or next((p["pid"] for p in processes if p.get("is_root")), None)
            # A multi-rank job trains in its ranks: children of the process started.
            several = row.rank_own or row.process_own
            loops = [p["pid"] for p in processes if p.get("ppid") == job_pid] if several else [job_pid]
            want_tid = row.loop_tid or st.get("pid")
            if st.get("pid") not in loops or st.get("tid") != want_tid:
                row.fail("thread", "steps on pid %s tid %s \"%s\", not the %s of %s" % (
                    st.get("pid"), st.get("tid"), st.get("thread_comm"),
                    "loop thread %d" % row.loop_tid if row.loop_tid else "main thread",
                    " or ".join(map(str, loops))))
        if row.own_by_process:
            return
        mean = row.mean_ms
        if row.own_ms is None:
            row.fail("own", "no own timing for this run")
        elif mean is None:
            row.fail("own", "no measured steps")
        else:
            err = mean / row.own_ms - 1
            if abs(err) > OWN_TOLERANCE:
                row.fail("own", "mean step %.3f ms vs own %.3f ms (%+.1f%%, limit %.0f%%)" % (
                    mean, row.own_ms, 100 * err, 100 * OWN_TOLERANCE))

    @staticmethod
    def same_finding(row, ref):
        """None when the two runs name the same bottleneck, else why not.
        One pair is the same finding told with less: a batch loaded in the
        training thread is data loading where fetch ranges mark it (the
        Python hook's) and the job's own CPU work before a copy to the GPU
        where the trace has none (attached, --no-python-hooks).  Accepted
        when the run without says so (step_analysis.data_fetch_ranges
        false), the run with loaded in its thread (waiting for data while
        running is its largest data cause), and both give it the same share
        of step time."""
        if row.diagnosis == ref.diagnosis:
            return None
        why = "diagnosis %s vs %s's %s" % (row.diagnosis, ref.mode, ref.diagnosis)
        if "launch_bound" in (row.diagnosis, ref.diagnosis):
            return Harness.either_side_of_launch_bound(row, ref, why)
        if {row.diagnosis, ref.diagnosis} == {"gpu_bound", "dominant_stage"}:
            return Harness.gpu_compute_either_way(row, ref, why)
        if {row.diagnosis, ref.diagnosis} == {"worker_process_wait", "data_loader_starvation"}:
            return Harness.workers_told_apart_by_the_hook(row, ref, why)
        if {row.diagnosis, ref.diagnosis} != {"host_cpu_work", "data_loader_starvation"}:
            return why
        unmarked, marked = (row, ref) if row.diagnosis == "host_cpu_work" else (ref, row)
        if unmarked.steps.get("data_fetch_ranges", True) or not marked.steps.get("data_fetch_ranges"):
            return why + " (fetch ranges in both or neither)"
        causes = {c["cause"]: c["ns"] for c in (marked.report.get("gpu_idle_attribution") or {}).get("causes", [])}
        running = causes.get("data_wait_running", 0)
        if running < max(causes.get("data_wait_futex", 0), causes.get("data_wait_blocked", 0)):
            return why + " (the data was not loaded in the training thread)"
        a = unmarked.report["diagnosis"].get("score_pct") or 0
        b = marked.report["diagnosis"].get("score_pct") or 0
        if abs(a - b) > PAIRED_FINDING_SCORE_TOLERANCE:
            return why + " (%.1f%% vs %.1f%% of step time)" % (a, b)
        row.notes.append("host_cpu_work (%.1f%%) in the run without fetch ranges is the %s run's data loading in "
                         "its thread (%.1f%%)" % (a, marked.mode, b))
        return None

    @staticmethod
    def either_side_of_launch_bound(row, ref, why):
        """Accepted when both reports said the reading could go either way:
        the launch-bound one fired near its threshold and the other's
        fallback names launch-bound as its near miss."""
        fired, other = (row, ref) if row.diagnosis == "launch_bound" else (ref, row)
        if not fired.report["diagnosis"].get("near_threshold") or \
                other.report["diagnosis"].get("near_miss") != "launch_bound":
            return why
        row.notes.append("launch_bound near its threshold in the %s run, its near miss in the %s run" % (
            fired.mode, other.mode))
        return None

    @staticmethod
    def workers_told_apart_by_the_hook(row, ref, why):
        """The Python hook's marks tell worker processes that are not a
        DataLoader's (no fetch range in the loop); a run without them reads
        data loading and says it cannot tell.  Same share of step time."""
        known, unknown = (row, ref) if row.diagnosis == "worker_process_wait" else (ref, row)
        if unknown.steps.get("python_hook_marks") or unknown.steps.get("data_fetch_ranges"):
            return why + " (the %s run had the hook's marks or fetch ranges)" % unknown.mode
        a = known.report["diagnosis"].get("score_pct") or 0
        b = unknown.report["diagnosis"].get("score_pct") or 0
        if abs(a - b) > PAIRED_FINDING_SCORE_TOLERANCE:
            return why + " (%.1f%% vs %.1f%% of step time)" % (a, b)
        row.notes.append("worker_process_wait (%.1f%%) in the %s run is the %s run's data loading it cannot tell "
                         "apart (%.1f%%)" % (a, known.mode, unknown.mode, b))
        return None

    @staticmethod
    def gpu_compute_either_way(row, ref, why):
        """gpu_bound (kernels >= 90% of the typical step) and dominant_stage
        with GPU compute the largest stage give the same advice (faster
        kernels); which one a job near 90% reads moves with the run."""
        other = row if row.diagnosis == "dominant_stage" else ref
        stages = (other.report.get("stage_summary") or {}).get("stages") or []
        top = max(stages, key=lambda s: s.get("pct_of_total", 0), default={})
        if top.get("stage") != "gpu_compute":
            return why + " (the %s run's largest stage is %s)" % (other.mode, top.get("stage"))
        row.notes.append("gpu_bound in one run, GPU compute the dominant stage (%.1f%%) in the %s run" % (
            top.get("pct_of_total", 0), other.mode))
        return None

    def check_pair(self, row, ref, check, spec):
        """l=a (row attached, ref launched) or a=u (row un-annotated, ref annotated)."""
        if row.report is None:
            row.fail(check, "this run has no report to compare")
            return
        if ref is None or ref.report is None:
            row.fail(check, "no %s report to compare with" % (ref.mode if ref else "reference"))
            return
        if "ranks" in spec and row.report.get("ranks") and ref.report.get("ranks"):
            rank_checks.check_pair(row, ref, check, LESS_WORK_THAN_AN_ITERATION, EXTRA_CUT_OFF_AN_ITERATION)
            if (why := self.same_finding(row, ref)) is not None:
                row.fail(check, why)
            return
        if "processes" in spec:
            process_checks.check_pair(row, ref, check, LESS_WORK_THAN_AN_ITERATION, EXTRA_CUT_OFF_AN_ITERATION)
            if (why := self.same_finding(row, ref)) is not None:
                row.fail(check, why)
            return
        if (why := self.same_finding(row, ref)) is not None:
            row.fail(check, why)
        if check == "a=u":
            # A unit with less work than an iteration (an evaluation cut out
            # as its own step by the kernel sequence) is no iteration; marks
            # put it inside one, or cut it off the iteration after it.
            # Both runs may be un-annotated (a script with no optimizer and no
            # backward pass has no marks either way): a fragment of an
            # iteration cut out as less work counts on either side.
            def less_work(r):
                return sum(1 for st in r.report.get("steps") or []
                           if (st.get("left_out") or "").startswith(LESS_WORK_THAN_AN_ITERATION))
            def cut_off(r):
                return sum(1 for st in r.report.get("steps") or []
                           if EXTRA_CUT_OFF_AN_ITERATION in (st.get("left_out") or ""))
            a = (row.steps.get("steps") or 0) - cut_off(row)
            b = (ref.steps.get("steps") or 0) - cut_off(ref)
            row_less, ref_less = less_work(row), less_work(ref)
            if min(abs(x - y) for x in (a, a - row_less) for y in (b, b - ref_less)) > STEP_COUNT_TOLERANCE:
                row.fail(check, "%d steps (%d of them less work than an iteration) vs %s's %d (%d)" % (
                    a, row_less, ref.mode, b, ref_less))
            return
        if None in (row.mean_ms, ref.mean_ms, row.own_ms, ref.own_ms):
            row.fail(check, "a mean step or an own timing is missing")
            return
        rel_row, rel_ref = row.mean_ms / row.own_ms, ref.mean_ms / ref.own_ms
        err = rel_row / rel_ref - 1
        if abs(err) > ATTACH_TOLERANCE:
            row.fail(check, "mean/own %.3f vs %s's %.3f (%+.1f%%, limit %.0f%%; means %.3f vs %.3f ms)" % (
                rel_row, ref.mode, rel_ref, 100 * err, 100 * ATTACH_TOLERANCE, row.mean_ms, ref.mean_ms))

    # ---- one script, every mode
    def run_script(self, name, spec):
        modes = self.args.modes
        is_trainer = name == "trainer"
        rows = {}
        if is_trainer and not self.trainer_ok:
            row = Row(name, "all")
            row.skipped = "no gpuos-trainer at %s" % self.trainer
            self.rows.append(row)
            return
        if self.profile == "gpu" and spec.get("ranks", 1) > gpu_count():
            # NCCL will not put two ranks of a communicator on one GPU.
            row = Row(name, "all")
            row.skipped = "%d ranks want as many GPUs; %d here" % (spec["ranks"], gpu_count())
            self.rows.append(row)
            return
        want = ["launched"] + (["nonvtx"] if is_trainer else ["nohooks"]) + ["attached", "uprobes"]
        for mode in want:
            if mode not in modes:
                continue
            if self.over_budget():
                row = Row(name, mode)
                row.skipped = "over the --budget of %ds" % self.args.budget
                self.rows.append(row)
                continue
            if mode == "nonvtx" and not trainer_has_no_nvtx(self.trainer):
                row = Row(name, mode)
                row.fail("run", "gpuos-trainer has no --no-nvtx: no un-annotated run")
            else:
                t0 = time.monotonic()
                row = self.attached(name, spec, rows.get("launched"), mode) if mode in ("attached", "uprobes") \
                    else self.launched(name, spec, mode)
                row.seconds = time.monotonic() - t0
            rows[mode] = row
            self.check_row(row, spec)
            if mode in ("attached", "uprobes"):
                # Attaching cannot install the Python hook (it is loaded at
                # the interpreter's start): the attached run is compared
                # with the launched run that had no hook either, where that
                # ran, so that the check sees what attaching changes.
                ref = rows.get("nohooks") or rows.get("launched")
                if ref is not None:
                    self.check_pair(row, ref, "l=a", spec)
            if mode in ("nohooks", "nonvtx") and "launched" in rows:
                self.check_pair(row, rows["launched"], "a=u", spec)
            self.rows.append(row)
            log("   %s %s: %s" % (name, mode, "PASS" if not row.failures else "FAIL"))

    def over_budget(self):
        return self.args.budget and time.monotonic() - self.started > self.args.budget

    def run(self):
        self.started = time.monotonic()
        specs = PROFILES[self.profile]
        self.trainer_ok = bool(self.trainer) and os.access(self.trainer, os.X_OK)
        for name, spec in specs.items():
            if self.args.only and not re.search(self.args.only, name):
                continue
            if name != "trainer" and not self.python:
                continue
            self.run_script(name, spec)


# ---------------------------------------------------------------- output
def fmt(v, spec="%.3f"):
    return "-" if v is None else spec % v


def table(rows):
    head = ["script", "mode", "steps (source)", "mean ms", "own ms", "vs own", "diagnosis", "l=a", "a=u", "result"]
    lines = []
    for r in rows:
        st = r.steps
        steps = "-" if not st else "%s/%s (%s)" % (st.get("measured_steps"), r.iters or "?", st.get("source"))
        vs = "-" if r.mean_ms is None or not r.own_ms else "%+.1f%%" % (100 * (r.mean_ms / r.own_ms - 1))

        def mark(check):
            applies = (check == "l=a" and r.mode in ("attached", "uprobes")) or \
                (check == "a=u" and r.mode in ("nohooks", "nonvtx"))
            if not applies:
                return ""
            return "FAIL" if any(f.startswith(check + ":") for f in r.failures) else "ok"
        checks = []
        for f in r.failures:
            check = f.split(":", 1)[0]
            if check not in checks:
                checks.append(check)
        result = "SKIP: " + r.skipped if r.skipped else ("PASS" if not r.failures else "FAIL " + ",".join(checks))
        lines.append([r.script, r.mode, steps, fmt(r.mean_ms), fmt(r.own_ms), vs, r.diagnosis or "-",
                      mark("l=a"), mark("a=u"), result])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)] if lines else [len(h) for h in head]
    widths[-1] = 0
    out = ["  ".join(str(x).ljust(w) for x, w in zip(head, widths)).rstrip()]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in lines]
    return "\n".join(out)


def pick_python(explicit):
    for candidate in ([explicit] if explicit else []) + [os.environ.get("PYTHON"), "python3", "/usr/bin/python3"]:
        if not candidate:
            continue
        try:
            if subprocess.run([candidate, "-c", "import torch"], capture_output=True, timeout=120).returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            pass
        if explicit:
            return None
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", required=False, help="the gpuos-trace binary")
    p.add_argument("--python", help="interpreter with torch for the scripts (default: $PYTHON, python3, "
                                    "/usr/bin/python3: the first that imports torch)")
    p.add_argument("--trainer", help="gpuos-trainer binary (its rows are skipped without one)")
    p.add_argument("--profile", choices=sorted(PROFILES), default="cpu")
    p.add_argument("--only", help="regex on script names")
    p.add_argument("--modes", default="launched,nohooks,nonvtx,attached",
                   help="comma list of launched, nohooks, nonvtx, attached, uprobes (default: %(default)s)")
    p.add_argument("--work", help="keep logs, traces and reports here (default: a temporary dir, removed unless a row failed)")
    p.add_argument("--json", help="also write the rows as JSON to this file")
    p.add_argument("--budget", type=int, default=0,
                   help="seconds: start no run after this much time (its row says so); 0: no limit")
    p.add_argument("--known-gaps", help="checks expected to fail, with why (see KNOWN_GAPS): reported, not failing")
    p.add_argument("--list", action="store_true", help="print the scripts and their arguments, run nothing")
    args = p.parse_args()
    if args.known_gaps:
        load_known_gaps(args.known_gaps)
    args.modes = set(args.modes.split(","))
    unknown = args.modes - {"launched", "nohooks", "nonvtx", "attached", "uprobes"}
    if unknown:
        p.error("--modes: unknown %s" % ",".join(sorted(unknown)))
    if args.list:
        for name, spec in PROFILES[args.profile].items():
            if not args.only or re.search(args.only, name):
                print("%-22s iters=%-5d %s" % (name, spec["iters"], " ".join(spec["args"])))
        return 0
    if not args.trace or not os.access(args.trace, os.X_OK):
        p.error("--trace: need the gpuos-trace binary (got %r)" % args.trace)
    if os.geteuid() != 0:
        print("SKIP: gpuos-trace needs root to load its eBPF programs")
        return 77
    py = pick_python(args.python)
    if py is None and not (args.only and re.fullmatch(args.only, "trainer")):
        print("SKIP: no Python here imports torch (%s)" % (args.python or "$PYTHON, python3, /usr/bin/python3"))
        return 77
    args.python = py
    if not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
    keep = bool(args.work)
    args.work = args.work or tempfile.mkdtemp(prefix="gpuos-corpus.")
    os.makedirs(args.work, exist_ok=True)
    started = time.monotonic()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    h = Harness(args)
    interrupted = ""
    try:
        h.run()
    except Interrupted as e:
        interrupted = str(e)
    except Exception:
        log("gpuos-trace corpus check: its traces, logs and reports are kept in %s" % args.work)
        raise
    finally:
        end_live_jobs()
    # A failed row's traces, logs and reports stay where they were written,
    # so a miss seen once (a timing check on a shared machine) can be read.
    failed = [r for r in h.rows if r.failures]
    if (failed or interrupted) and not keep:
        print("gpuos-trace corpus check: the failed run's traces, logs and reports are kept in %s"
              % args.work, flush=True)
    elif not keep:
        shutil.rmtree(args.work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_json() for r in h.rows], f, indent=1)
    print("gpuos-trace corpus check (%s profile, %s, %.0fs)" % (
        args.profile, py or "no python", time.monotonic() - started))
    print(table(h.rows))
    for r in h.rows:
        for f in r.failures:
            print("FAIL %s %s %s" % (r.script, r.mode, f))
        for gap in r.gaps:
            print("GAP %s %s %s" % (r.script, r.mode, gap))
        for note in r.notes:
            print("note %s %s: %s" % (r.script, r.mode, note))
    if interrupted:
        print("interrupted by %s: the rows after the last one above did not run" % interrupted)
        return 1
    if not h.rows:
        print("no rows ran")
        return 77
    if all(r.skipped for r in h.rows):
        return 77
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
