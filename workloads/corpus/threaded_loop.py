#!/usr/bin/env python3
"""A training loop on a thread that is not the main thread, with checkpoints
written in the background, as job runners and long fine-tuning jobs do.

Ray Train runs the user's training function on a thread of its worker, and
hand-written launchers keep the main thread for signals and a heartbeat
while the loop runs beside it (`threading.Thread(target=train).start()`,
then `join(timeout=...)` in a loop that touches a heartbeat file, as
watchdog-supervised jobs do).  The loop: a DataLoader with `--workers`
processes over an in-memory dataset with noise added in the workers, a
residual MLP, cross-entropy with label smoothing, `clip_grad_norm_`, AdamW,
a cosine schedule, the loss read back every `--log-every` iterations.
Every `--ckpt-every` iterations the model's and optimizer's state is copied
on the loop thread (`state_dict` tensors cloned, as Lightning's
AsyncCheckpointIO and `torch.distributed.checkpoint.async_save` stage it)
and written by `torch.save` on a checkpoint thread while training goes on;
the copy is printed on its own line and left out of the iteration time, the
write overlaps the next iterations, and the last two checkpoints are kept.

An iteration is one optimizer step: from the end of the previous one (or of
the checkpoint copy after it) to the end of this one, data loading included.
"""
import argparse
import math
import os
import queue
import tempfile
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def parse_args():
    p = argparse.ArgumentParser(description="a training loop on its own thread, checkpoints written in the background")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--num-classes", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--dataset-size", type=int, default=50000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--ckpt-every", type=int, default=50, help="iterations between checkpoints (0: never)")
    p.add_argument("--heartbeat-s", type=float, default=0.5, help="the main thread's heartbeat period")
    p.add_argument("--iters", type=int, default=None, help="optimizer steps")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 500
    return args


class NoisyFeatures(Dataset):
    """Class-dependent feature vectors; the workers add fresh noise to each."""

    def __init__(self, size, features, num_classes, seed):
        g = torch.Generator().manual_seed(seed)
        self.centers = torch.randn(num_classes, features, generator=g)
        self.labels = torch.randint(0, num_classes, (size,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        label = self.labels[index]
        return self.centers[label] + 0.5 * torch.randn_like(self.centers[label]), label


class ResidualMLP(nn.Module):
    def __init__(self, features, hidden, blocks, num_classes):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden * 2), nn.GELU(), nn.Linear(hidden * 2, hidden))
            for _ in range(blocks))
        self.out = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, num_classes))

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


class AsyncCheckpointWriter:
    """Stages a copy of the state on the caller's thread; torch.save runs on its own thread."""

    def __init__(self, directory, keep_last=2):
        self.directory = directory
        self.keep_last, self.kept = keep_last, []  # as save_total_limit does
        self.pending = queue.Queue()
        self.thread = threading.Thread(target=self._write_loop, name="ckpt-writer", daemon=True)
        self.thread.start()
        self.written = 0

    def save(self, step, model, optimizer):
        staged = {"step": step, "model": _copy_to_cpu(model.state_dict()),
                  "optimizer": _copy_to_cpu(optimizer.state_dict())}
        self.pending.put(staged)

    def _write_loop(self):
        while True:
            staged = self.pending.get()
            if staged is None:
                return
            path = os.path.join(self.directory, "checkpoint-%d.pt" % staged["step"])
            torch.save(staged, path + ".tmp")
            os.replace(path + ".tmp", path)
            self.kept.append(path)
            while len(self.kept) > self.keep_last:
                os.remove(self.kept.pop(0))
            self.written += 1

    def close(self):
        self.pending.put(None)
        self.thread.join()


def _copy_to_cpu(obj):
    if torch.is_tensor(obj):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _copy_to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_copy_to_cpu(v) for v in obj)
    return obj


def train(args, device, ckpt_dir, result):
    model = ResidualMLP(args.features, args.hidden, args.blocks, args.num_classes).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    total = args.iters if args.iters is not None else 10 ** 6
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    loader = DataLoader(NoisyFeatures(args.dataset_size, args.features, args.num_classes, args.seed),
                        batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                        pin_memory=device.type == "cuda", drop_last=True, persistent_workers=args.workers > 0)
    writer = AsyncCheckpointWriter(ckpt_dir)
    print("residual MLP %d blocks x %d, %.1fM parameters, batch %d, %d workers, %s, torch %s" % (
        args.blocks, args.hidden, sum(p.numel() for p in model.parameters()) / 1e6, args.batch_size, args.workers,
        device, torch.__version__), flush=True)
    print("loop thread tid %d" % threading.get_native_id(), flush=True)

    times = []
    step = 0
    start = time.perf_counter()
    end = start
    done = False
    while not done:
        model.train()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            if step % args.log_every == 0:
                loss_value = loss.item()
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if step % args.log_every == 0:
                recent = times[-args.log_every:]
                print("step %d loss %.4f lr %.2e %.3f ms/iter" % (
                    step, loss_value, scheduler.get_last_lr()[0], 1000 * sum(recent) / len(recent)), flush=True)
            if (args.iters is not None and step >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
            if args.ckpt_every and step % args.ckpt_every == 0:
                writer.save(step, model, optimizer)
                t1 = time.perf_counter()
                print("checkpoint %d staged in %.1f ms (%d written)" % (step, 1000 * (t1 - end), writer.written),
                      flush=True)
                end = t1
    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    writer.close()
    result.update(step=step, times=times, elapsed=time.perf_counter() - start)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    result = {}
    with tempfile.TemporaryDirectory(prefix="threaded_loop_ckpt.") as ckpt_dir:
        errors = []

        def run():
            try:
                train(args, device, ckpt_dir, result)
            except BaseException as e:  # the main thread reports it and exits non-zero
                errors.append(e)
                raise

        loop = threading.Thread(target=run, name="train-loop")
        loop.start()
        heartbeat = os.path.join(ckpt_dir, "heartbeat")
        while loop.is_alive():
            loop.join(timeout=args.heartbeat_s)
            with open(heartbeat, "w") as f:
                f.write("%.3f\n" % time.time())
        if errors:
            raise SystemExit("training thread failed: %r" % (errors[0],))

    times = result["times"]
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=threaded_loop iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              result["step"], warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              result["elapsed"], device.type), flush=True)


if __name__ == "__main__":
    main()
