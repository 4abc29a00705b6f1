#!/usr/bin/env python3
"""A small MLP classifier trained under torch.compile.

The model is wrapped with torch.compile(model, mode=--compile-mode), and
with --compile-optimizer the optimizer step too, as PyTorch's recipe
"Compiling the optimizer with torch.compile" does;
"reduce-overhead" captures the step's kernels in CUDA graphs.  PyTorch
without torch.compile (1.x) runs the same loop eagerly and says so.  The
data stays on the device (batches generated up front and cycled); Adam;
the first iterations include compilation and are printed as such.
"""
import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, in_features, hidden, layers, num_classes):
        super().__init__()
        dims = [in_features] + [hidden] * layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.out = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.out(x)


def parse_args():
    p = argparse.ArgumentParser(description="torch.compile'd MLP")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--compile-mode", choices=["default", "reduce-overhead", "none"], default="default",
                   help="torch.compile mode; none: eager")
    p.add_argument("--compile-optimizer", choices=["none", "graph", "fullgraph"], default="none",
                   help="also compile optimizer.step() (PyTorch's recipe), allowing graph breaks or not")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--in-features", type=int, default=784)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--num-batches", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--warmup-iters", type=int, default=10, help="iterations (compilation) left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 3000
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)

    model = MLP(args.in_features, args.hidden, args.layers, args.num_classes).to(device)
    compiled = "eager"
    if args.compile_mode != "none":
        if hasattr(torch, "compile"):
            model = torch.compile(model, mode=args.compile_mode)
            compiled = args.compile_mode
        else:
            print("torch.compile is not available in torch %s: running eagerly" % torch.__version__,
                  file=sys.stderr, flush=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    update = optimizer.step
    if args.compile_optimizer != "none" and hasattr(torch, "compile"):
        @torch.compile(fullgraph=args.compile_optimizer == "fullgraph")
        def update():
            optimizer.step()
        compiled += ", optimizer " + args.compile_optimizer
    xs = [torch.randn(args.batch_size, args.in_features, device=device) for _ in range(args.num_batches)]
    ys = [torch.randint(0, args.num_classes, (args.batch_size,), device=device) for _ in range(args.num_batches)]
    print("MLP %dx%d, batch %d, %s, compile=%s, torch %s" % (
        args.layers, args.hidden, args.batch_size, device, compiled, torch.__version__), flush=True)

    times = []
    it = 0
    start = time.perf_counter()
    end = start
    done = False
    while not done:
        for x, y in zip(xs, ys):
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            update()

            it += 1
            if it % args.log_every == 0 or it <= 3:
                loss_value = loss.item()
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it <= 3:
                print("iter %d loss %.4f %.1f ms (includes compilation)" % (it, loss_value, 1000 * times[-1]),
                      flush=True)
            elif it % args.log_every == 0:
                recent = times[-args.log_every:]
                print("iter %d loss %.4f %.3f ms/iter" % (it, loss_value, 1000 * sum(recent) / len(recent)),
                      flush=True)
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=compiled_mlp iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s compile=%s" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, compiled), flush=True)


if __name__ == "__main__":
    main()
