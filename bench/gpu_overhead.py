#!/usr/bin/env python3
"""One measurement of gpuos-trace's CUDA-side overhead (run on the GPU machine
by bench/run_gpu_overhead.sh, which alternates untraced, gpuos-trace and
torch.profiler runs and prints the medians side by side).

  gpu_overhead.py --mode launch [--profiler]   tiny-kernel launch rate (launches/s)
  gpu_overhead.py --mode train  [--profiler]   small MLP training loop (steps/s)

Prints one JSON line: {"mode", "profiler", "unit", "rate", "paced_step",
"pace_ms", "threads"}.  "rate" is steps (or launches) per second;
"paced_step" the median chunk's time per step in units of the CPU's pace
measured next to it, and "pace_ms" the median pace (bench/cpu_pace.py, which
says why, and why the summary seldom trusts it for these loops).  "threads"
splits the timed chunks' time by the process's threads, from the kernel's
own accounting (/proc/self/task/*/schedstat, and this thread's CPU clock),
per iteration: on-CPU and run-queue microseconds of each thread name
(Python's main thread, PyTorch's autograd thread, CUPTI's and the tracer's
threads), so that a tracer's cost shows where it lands: more work on the
launching threads, or time they wait.
"""
import argparse
import json
import os
import threading
import time

import torch

import cpu_pace


def thread_times():
    """tid -> (comm, on-CPU ns, run-queue ns) for every thread of this process.
    schedstat's on-CPU figure of a running thread is only brought up to date
    at scheduler ticks (4 ms apart here), so the calling thread's own comes
    from its CPU clock, which is exact; the others are read while they wait,
    mostly (the launching threads are done with a chunk when it is read)."""
    me = str(threading.get_native_id())
    times = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                on_cpu, runq, _ = (int(x) for x in f.read().split())
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        if tid == me:
            on_cpu = time.thread_time_ns()
        times[tid] = (comm, on_cpu, runq)
    return times


def launch_step_fn():
    x = torch.zeros(1, device="cuda")
    return lambda: x.add_(1.0)


def train_step_fn():
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 64)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 64, device="cuda"), torch.randn(128, 64, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return step


def measure(step, n, chunks):
    """The timed loop: n steps in paced chunks (cpu_pace.py), then one sync.
    Returns the result fields: raw rate, paced time per step, pace, and the
    threads' split of the chunks' time."""
    per_thread = {}  # thread name -> [on-CPU ns, run-queue ns] over the chunks
    start_times = {}

    def before():
        start_times.clear()
        start_times.update(thread_times())

    def after():
        for tid, (comm, on_cpu, runq) in thread_times().items():
            _, on0, rq0 = start_times.get(tid, (comm, 0, 0))
            totals = per_thread.setdefault(comm, [0, 0])
            totals[0] += on_cpu - on0
            totals[1] += runq - rq0

    torch.cuda.synchronize()
    seconds, steps, paced, pace = cpu_pace.run_paced(step, n, chunks, before, after)
    start = time.perf_counter()
    torch.cuda.synchronize()
    seconds += time.perf_counter() - start
    threads = {name: {"cpu_us": round(c / 1e3 / steps, 2), "runq_us": round(r / 1e3 / steps, 2)}
               for name, (c, r) in sorted(per_thread.items(), key=lambda kv: -kv[1][0])
               if c / 1e3 / steps >= 0.01}
    return {"rate": steps / seconds, "paced_step": paced, "pace_ms": pace * 1e3,
            "threads": threads}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["launch", "train"], required=True)
    parser.add_argument("--profiler", action="store_true")
    parser.add_argument("--iters", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=20,
                        help="paced chunks of the timed loop (cpu_pace.py)")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.mode == "launch":
        n = args.iters or 50000
        step, unit = launch_step_fn(), "launches/s"
    else:
        n = args.iters or 1000
        step, unit = train_step_fn(), "steps/s"
    measure(step, n, args.chunks)  # warm-up: allocator, cuBLAS handles, module load
    if args.profiler:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            result = measure(step, n, args.chunks)
    else:
        result = measure(step, n, args.chunks)
    print(json.dumps({"mode": args.mode, "profiler": args.profiler, "unit": unit, **result}))


if __name__ == "__main__":
    main()
