#!/usr/bin/env python3
"""A training loop for capture-window checks and benchmarks (issue #19):
each step an NVTX range "step N" that ends with loss.item() (so every kernel
of the step has finished inside it: a window's kernels are countable), on
a fixed batch already on the GPU, so the step is the GPU-side work alone.

  capture_workload.py --model mlp|resnet18 [--steps N | --seconds S] [--warmup W]
                      [--profile-every N]   torch.profiler, schedule of one
                                            recorded step in N
                      [--profile-seconds P] the same, N being the steps of P
                                            seconds (from the warmup's steps)
                      [--no-marks]          no NVTX step ranges (a job that marks
                                            no steps: with --no-python-hooks, the
                                            shim counts them from loss.item()'s
                                            rhythm)
                      [--log-steps FILE]    "N start_ns end_ns" per step
                                            (time.monotonic_ns: CLOCK_MONOTONIC,
                                            the trace's clock)
                      [--until-signal]      run until SIGUSR1 instead of for
                                            --steps/--seconds; "warm" on stderr
                                            once the warmup is done
                                            (bench/phase_overhead.py)
                      [--device cpu]        the mlp on the CPU, no NVTX ranges
                                            (to try a benchmark on a machine
                                            without a GPU)

Prints one JSON line: {"model", "steps", "steps_per_s", "median_step_ms"}
over the steps after the warmup.  resnet18 is the seeds' model
(workloads/python/resnet_data_pipeline.py: torchvision's, batch 64) at
224x224 on synthetic data; mlp is bench/gpu_overhead.py's small MLP.
"""
import argparse
import json
import os
import signal
import statistics
import sys
import time

import torch


def build(model_name, device):
    if model_name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 64)).to(device)
        x, y = torch.randn(128, 64, device=device), torch.randn(128, 64, device=device)
        loss_fn = torch.nn.functional.mse_loss
    else:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "workloads", "python"))
        sys.dont_write_bytecode = True
        from resnet_data_pipeline import make_resnet18
        model = make_resnet18(1000).cuda()
        x = torch.randn(64, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (64,), device="cuda")
        loss_fn = torch.nn.functional.cross_entropy
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # waits for the step's kernels
    return step


def start_profiler(every):
    from torch.profiler import ProfilerActivity, profile, schedule
    # One active step in every N; the warmup step before it runs the
    # profiler too (torch.profiler's own rule), as it does for any user.
    every = max(every, 3)
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   schedule=schedule(wait=every - 2, warmup=1, active=1, repeat=0),
                   on_trace_ready=lambda p: None)
    prof.__enter__()
    return prof


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "resnet18"], required=True)
    parser.add_argument("--steps", type=int, default=0, help="default: 2000 (mlp), 200 (resnet18)")
    parser.add_argument("--seconds", type=float, default=0,
                        help="run for this long after the warmup instead of a number of steps")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--profile-every", type=int, default=0)
    parser.add_argument("--profile-seconds", type=float, default=0,
                        help="torch.profiler, one recorded step every this long (the step count from the "
                             "warmup's median step)")
    parser.add_argument("--log-steps", default="")
    parser.add_argument("--no-marks", action="store_true")
    parser.add_argument("--until-signal", action="store_true")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args()
    if args.device == "cpu":
        if args.model != "mlp":
            parser.error("--device cpu runs the mlp only")
        args.no_marks = True
    steps = args.steps or (2000 if args.model == "mlp" else 200)
    stop = []
    if args.until_signal:
        signal.signal(signal.SIGUSR1, lambda *_: stop.append(True))
    torch.manual_seed(0)
    step = build(args.model, args.device)
    prof = start_profiler(args.profile_every) if args.profile_every else None
    times = []
    deadline = None
    i = 0
    while True:
        if i == args.warmup:
            if args.profile_seconds and prof is None:
                warm = statistics.median((e - s) for s, e in times) if times else 1e6
                prof = start_profiler(int(round(args.profile_seconds * 1e9 / warm)))
            if args.seconds:
                deadline = time.monotonic_ns() + int(args.seconds * 1e9)
            if args.until_signal:
                print("warm", file=sys.stderr, flush=True)
        if args.until_signal:
            if stop:
                break
        elif deadline is not None:
            if time.monotonic_ns() >= deadline:
                break
        elif i >= steps:
            break
        start = time.monotonic_ns()
        if args.no_marks:
            step()
        else:
            torch.cuda.nvtx.range_push("step %d" % i)
            step()
            torch.cuda.nvtx.range_pop()
        end = time.monotonic_ns()
        if prof is not None:
            prof.step()
        times.append((start, end))
        i += 1
    if prof is not None:
        prof.__exit__(None, None, None)
    if args.log_steps:
        with open(args.log_steps, "w") as out:
            for i, (start, end) in enumerate(times):
                out.write("%d %d %d\n" % (i, start, end))
    measured = times[args.warmup:]
    seconds = (measured[-1][1] - measured[0][0]) / 1e9
    print(json.dumps({"model": args.model, "steps": len(measured),
                      "steps_per_s": len(measured) / seconds,
                      "median_step_ms": statistics.median((e - s) / 1e6 for s, e in measured)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
