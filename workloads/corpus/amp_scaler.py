#!/usr/bin/env python3
"""Automatic mixed precision with a GradScaler, the way PyTorch's AMP recipe
writes it, in device-agnostic form: float16 autocast and a GradScaler on
CUDA; on the CPU, bfloat16 autocast and the scaler disabled (enabled=False
turns every scaler call into a pass-through).

A stack of Linear+ReLU layers trained with SGD on batches generated up
front on the device (as in the recipe), cycled through epoch after epoch.
"""
import argparse
import time

import torch
import torch.nn as nn


def make_model(in_size, out_size, num_layers, hidden):
    layers = []
    for _ in range(num_layers - 1):
        layers.append(nn.Linear(in_size, hidden))
        layers.append(nn.ReLU())
        in_size = hidden
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


def make_scaler(device_type, enabled):
    # torch.amp.GradScaler("cuda") from PyTorch 2.3 on; torch.cuda.amp's before.
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device_type, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def parse_args():
    p = argparse.ArgumentParser(description="AMP + GradScaler training loop")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--in-size", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--out-size", type=int, default=4096)
    p.add_argument("--num-layers", type=int, default=3)
    p.add_argument("--num-batches", type=int, default=50, help="batches generated up front, cycled")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 1000
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = args.device
    use_amp = True
    amp_dtype = torch.float16 if device == "cuda" else torch.bfloat16

    net = make_model(args.in_size, args.out_size, args.num_layers, args.hidden).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    loss_fn = torch.nn.MSELoss().to(device)
    data = [torch.randn(args.batch_size, args.in_size, device=device) for _ in range(args.num_batches)]
    targets = [torch.randn(args.batch_size, args.out_size, device=device) for _ in range(args.num_batches)]
    scaler = make_scaler(device, enabled=use_amp and device == "cuda")
    print("AMP %s on %s, scaler %s, torch %s" % (
        amp_dtype, device, "on" if scaler.is_enabled() else "off", torch.__version__), flush=True)

    times = []
    it = 0
    start = time.perf_counter()
    end = start
    done = False
    epoch = 0
    while not done:
        for input, target in zip(data, targets):
            with torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_amp):
                output = net(input)
                loss = loss_fn(output, target)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

            it += 1
            if it % args.log_every == 0:
                loss_value = loss.item()
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it % args.log_every == 0:
                recent = times[-args.log_every:]
                print("epoch %d iter %d loss %.4f scale %.0f  %.2f ms/iter" % (
                    epoch, it, loss_value, scaler.get_scale() if scaler.is_enabled() else 1.0,
                    1000 * sum(recent) / len(recent)), flush=True)
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
        epoch += 1

    if device == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=amp_scaler iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s amp_dtype=%s scaler=%d" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device, str(amp_dtype).replace("torch.", ""),
              int(scaler.is_enabled())), flush=True)


if __name__ == "__main__":
    main()
