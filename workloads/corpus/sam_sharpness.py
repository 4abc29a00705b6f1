#!/usr/bin/env python3
"""Sharpness-aware minimization (SAM) written as its widely copied
reference implementation (davda54/sam) and its README's loop use it: two
forward and backward passes per iteration and one update of the weights.

SAM is a torch.optim.Optimizer that wraps a base optimizer (SGD with
momentum here).  Per batch: the loss and its gradient at the weights
(first backward), `optimizer.first_step()` moves the weights to the worst
point within --rho; the loss and its gradient there (second backward, with
BatchNorm's running statistics frozen as the reference's bypass does),
`optimizer.second_step()` restores the weights and calls the base
optimizer's step().  Neither first_step nor second_step is named step();
only the base optimizer's step() is, called from inside second_step.

`--closure` uses the README's other form: the first backward in the loop,
then `optimizer.step(closure)` with the closure doing the second forward
and backward: SAM's own step() runs first_step, the closure and
second_step, so the base optimizer's step() runs nested inside SAM's.

A small WideResNet-style CNN on CIFAR-sized random images held on the
device (no DataLoader), cross-entropy with label smoothing, a step
learning-rate schedule by epoch.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"
        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super(SAM, self).__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]  # get back to "w" from "w + e(w)"
        self.base_optimizer.step()  # do the actual "sharpness-aware" update
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)  # the closure should do a full forward-backward pass
        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        norm = torch.norm(
            torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                for group in self.param_groups for p in group["params"]
                if p.grad is not None
            ]),
            p=2)
        return norm


def disable_running_stats(model):
    def _disable(module):
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.backup_momentum = module.momentum
            module.momentum = 0
    model.apply(_disable)


def enable_running_stats(model):
    def _enable(module):
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and hasattr(module, "backup_momentum"):
            module.momentum = module.backup_momentum
    model.apply(_enable)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        o = F.relu(self.bn1(x))
        y = self.conv1(o)
        y = self.conv2(F.relu(self.bn2(y)))
        return y + (x if self.shortcut is None else self.shortcut(o))


class WideResNet(nn.Module):
    def __init__(self, depth_per_group, width, classes):
        super().__init__()
        widths = [16, 16 * width, 32 * width, 64 * width]
        self.conv = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        blocks = []
        for g in range(3):
            for i in range(depth_per_group):
                blocks.append(BasicBlock(widths[g] if i == 0 else widths[g + 1], widths[g + 1],
                                         (1 if g == 0 else 2) if i == 0 else 1))
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(widths[3])
        self.fc = nn.Linear(widths[3], classes)

    def forward(self, x):
        x = self.blocks(self.conv(x))
        x = F.adaptive_avg_pool2d(F.relu(self.bn(x)), 1).flatten(1)
        return self.fc(x)


def parse_args():
    p = argparse.ArgumentParser(description="SAM (sharpness-aware minimization) training loop")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--depth", type=int, default=2, help="blocks per group")
    p.add_argument("--width", type=int, default=4, help="WideResNet's width factor")
    p.add_argument("--train-size", type=int, default=10000, help="images in the in-memory training set")
    p.add_argument("--rho", type=float, default=0.05)
    p.add_argument("--adaptive", action="store_true", help="ASAM")
    p.add_argument("--closure", action="store_true", help="optimizer.step(closure) instead of first/second_step")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 300
    if args.batch_size < 1 or args.train_size < args.batch_size:
        p.error("--train-size must hold at least one batch of --batch-size (>= 1)")
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)

    images = torch.randn(args.train_size, 3, args.image_size, args.image_size, device=device)
    labels = torch.randint(0, 10, (args.train_size,), device=device)
    model = WideResNet(args.depth, args.width, 10).to(device)
    optimizer = SAM(model.parameters(), torch.optim.SGD, rho=args.rho, adaptive=args.adaptive,
                    lr=args.lr, momentum=0.9, weight_decay=5e-4)
    batches_per_epoch = args.train_size // args.batch_size
    print("SAM (%s) WideResNet-%dx%d on %s, %d batches an epoch, torch %s" % (
        "closure" if args.closure else "first/second step", args.depth * 6 + 4, args.width, device,
        batches_per_epoch, torch.__version__), flush=True)

    times = []
    it = 0
    start = time.perf_counter()
    end = start
    epoch = 0
    done = False
    while not done:
        for g in optimizer.param_groups:
            g["lr"] = args.lr * (0.2 ** (epoch // 3))
        model.train()
        order = torch.randperm(args.train_size, device=device)
        for b in range(batches_per_epoch):
            idx = order[b * args.batch_size:(b + 1) * args.batch_size]
            inputs, targets = images[idx], labels[idx]

            enable_running_stats(model)
            predictions = model(inputs)
            loss = F.cross_entropy(predictions, targets, label_smoothing=0.1)
            loss.mean().backward()
            if args.closure:
                def closure():
                    disable_running_stats(model)
                    second = F.cross_entropy(model(inputs), targets, label_smoothing=0.1)
                    second.mean().backward()
                    return second
                optimizer.step(closure)
                optimizer.zero_grad()
            else:
                optimizer.first_step(zero_grad=True)
                disable_running_stats(model)
                F.cross_entropy(model(inputs), targets, label_smoothing=0.1).mean().backward()
                optimizer.second_step(zero_grad=True)

            it += 1
            if it % args.log_every == 0:
                with torch.no_grad():
                    correct = (predictions.argmax(1) == targets).float().mean().item()
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it % args.log_every == 0:
                recent = times[-args.log_every:]
                print("epoch %d iter %d loss %.4f acc %.3f lr %.4f  %.2f ms/iter" % (
                    epoch, it, loss.item(), correct, optimizer.param_groups[0]["lr"],
                    1000 * sum(recent) / len(recent)), flush=True)
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
    print("RESULT script=sam_sharpness iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s closure=%d" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, int(args.closure)), flush=True)


if __name__ == "__main__":
    main()
