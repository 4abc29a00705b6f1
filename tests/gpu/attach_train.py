#!/usr/bin/env python3
"""A PyTorch training job to attach to (issue #6's GPU check).

A small conv net on synthetic data; every step ends with loss.item() (one
sync), so each step launches the same kernels.  Runs for --seconds, then
writes one line per step to --log:  step <index> <end_ns>  (CLOCK_MONOTONIC,
the clock of the trace), and exits 0.  Prints "ready" after warm-up.
"""
import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--log", required=True)
    args = p.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x_cpu = torch.randn(64, 3, 64, 64)
    y_cpu = torch.randint(0, 10, (64,))
    ends = []
    deadline = time.monotonic() + args.seconds
    i = 0
    while time.monotonic() < deadline:
        x, y = x_cpu.cuda(), y_cpu.cuda()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        ends.append(time.monotonic_ns())
        if i == 20:
            print("ready", flush=True)
        i += 1
    with open(args.log, "w") as out:
        for n, t in enumerate(ends):
            out.write("step %d %d\n" % (n, t))


if __name__ == "__main__":
    main()
