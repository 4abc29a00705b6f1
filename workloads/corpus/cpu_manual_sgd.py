#!/usr/bin/env python3
"""A CPU training loop with a hand-written update and no DataLoader.

A two-layer network fitted to a synthetic regression problem: the data set
is one pair of tensors in memory, shuffled each epoch with randperm and
sliced into mini-batches; gradients come from autograd and the update is
written out (w -= lr * w.grad under torch.no_grad(), then grad.zero_()).
No optimizer object, no DataLoader, no GPU.  --device is accepted for the
same command line as the other scripts; auto means cpu here.
"""
import argparse
import time

import torch


def parse_args():
    p = argparse.ArgumentParser(description="hand-written SGD on the CPU")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: cpu (this is the no-GPU case)")
    p.add_argument("--samples", type=int, default=200000)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 2000
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cpu" if args.device == "auto" else args.device)

    X = torch.randn(args.samples, args.features)
    true_w = torch.randn(args.features, 1) / args.features ** 0.5
    Y = torch.tanh(X @ true_w) + 0.05 * torch.randn(args.samples, 1)
    X, Y = X.to(device), Y.to(device)

    w1 = (torch.randn(args.features, args.hidden, device=device) / args.features ** 0.5).requires_grad_()
    b1 = torch.zeros(args.hidden, device=device, requires_grad=True)
    w2 = (torch.randn(args.hidden, 1, device=device) / args.hidden ** 0.5).requires_grad_()
    b2 = torch.zeros(1, device=device, requires_grad=True)
    params = [w1, b1, w2, b2]
    print("%d samples x %d features, batch %d, %s, %d threads, torch %s" % (
        args.samples, args.features, args.batch_size, device, torch.get_num_threads(), torch.__version__),
        flush=True)

    times = []
    it = 0
    start = time.perf_counter()
    end = start
    done = False
    epoch = 0
    while not done:
        perm = torch.randperm(args.samples, device=device)
        for i in range(0, args.samples, args.batch_size):
            idx = perm[i:i + args.batch_size]
            xb, yb = X[idx], Y[idx]
            pred = torch.relu(xb @ w1 + b1) @ w2 + b2
            loss = ((pred - yb) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p -= args.lr * p.grad
                    p.grad.zero_()

            it += 1
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it % args.log_every == 0:
                recent = times[-args.log_every:]
                print("epoch %d iter %d loss %.5f %.3f ms/iter" % (
                    epoch, it, loss.item(), 1000 * sum(recent) / len(recent)), flush=True)
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
        epoch += 1

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=cpu_manual_sgd iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
