#!/usr/bin/env python3
"""One measurement of gpuos-trace's CUDA-side overhead (run on the GPU machine
by bench/run_gpu_overhead.sh, which alternates untraced, gpuos-trace and
torch.profiler runs and prints the medians side by side).

  gpu_overhead.py --mode launch [--profiler]   tiny-kernel launch rate (launches/s)
  gpu_overhead.py --mode train  [--profiler]   small MLP training loop (steps/s)

Prints one JSON line: {"mode", "profiler", "rate", "unit"}.
"""
import argparse
import json
import time

import torch


def launch_loop(n):
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def train_loop(n, state):
    model, opt, x, y = state
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["launch", "train"], required=True)
    parser.add_argument("--profiler", action="store_true")
    parser.add_argument("--iters", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.mode == "launch":
        n = args.iters or 50000
        run = lambda: launch_loop(n)
        unit = "launches/s"
    else:
        n = args.iters or 1000
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 64)).cuda()
        state = (model, torch.optim.SGD(model.parameters(), lr=0.01),
                 torch.randn(128, 64, device="cuda"), torch.randn(128, 64, device="cuda"))
        run = lambda: train_loop(n, state)
        unit = "steps/s"
    run()  # warm-up: allocator, cuBLAS handles, module load
    if args.profiler:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            rate = run()
    else:
        rate = run()
    print(json.dumps({"mode": args.mode, "profiler": args.profiler, "rate": rate, "unit": unit}))


if __name__ == "__main__":
    main()
