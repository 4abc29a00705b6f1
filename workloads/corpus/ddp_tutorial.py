#!/usr/bin/env python3
"""Distributed data parallel training as PyTorch's DDP tutorial series
(pytorch/examples distributed/ddp-tutorial-series, multigpu_torchrun.py)
writes it: a Trainer class with _run_batch, _run_epoch and _save_snapshot,
one process per rank started by torchrun (RANK, LOCAL_RANK, WORLD_SIZE in
the environment; init_process_group with env://), a DistributedSampler
with set_epoch, and global rank 0 saving a snapshot every --save-every
epochs.  As real jobs grow from it:
- an MLP classifier on a synthetic in-memory dataset, fed by a DataLoader
  with --workers processes (pinned memory and non_blocking copies on CUDA);
- --grad-accum K micro-batches per optimizer step, the first K-1 under
  model.no_sync() so that DDP all-reduces gradients once per step;
- after every epoch, an evaluation on each rank's shard whose counts are
  summed with dist.all_reduce, then the snapshot on rank 0 and a
  dist.barrier() on every rank;
- --spawn N: the tutorial's multigpu.py instead, N ranks started by
  torch.multiprocessing.spawn with the rank as an argument (no RANK in any
  environment).
Backend nccl on CUDA (each rank on the GPU of its local rank, modulo the
GPUs there are), gloo on the CPU.

Every rank prints its own lines, prefixed "[rank R]": every --log-every
optimizer steps "<X> ms/iter" (an iteration is one optimizer step, data
loading included; evaluation, snapshot and barrier time left out and
printed on their own lines), and last a RESULT line with rank=R.  The
RESULT line's sync_wait_ms_per_iter is the time the rank waited in the
logged loss.item() per iteration: on CUDA it waits for its GPU, whose
all-reduce waits for the slowest rank, so the ranks that are ahead wait
longer there and the slowest rank least (which rank holds the others back,
by the job's own clock; on the CPU gloo's all-reduce waits inside backward
and this is about 0 on every rank).
"""
import argparse
import contextlib
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    """Feature vectors whose class is a function of the features."""

    def __init__(self, size, in_dim, num_classes, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(size, in_dim, generator=g)
        w = torch.randn(in_dim, num_classes, generator=g)
        self.y = (self.x @ w).argmax(dim=1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def build_model(args):
    layers, width = [], args.in_dim
    for _ in range(args.layers):
        layers += [nn.Linear(width, args.hidden), nn.ReLU()]
        width = args.hidden
    layers.append(nn.Linear(width, args.num_classes))
    return nn.Sequential(*layers)


class Trainer:
    def __init__(self, model, train_data, val_data, optimizer, args, local_rank, device):
        self.args = args
        self.device = device
        self.global_rank = dist.get_rank()
        self.local_rank = local_rank
        self.model = DDP(model.to(device), device_ids=[local_rank] if device.type == "cuda" else None)
        self.train_data = train_data
        self.val_data = val_data
        self.optimizer = optimizer
        self.snapshot_path = os.path.join(args.snapshot_dir, "snapshot.pt")
        self.times = []
        self.sync_wait = 0.0
        self.step = 0
        self.done = False

    def say(self, text):
        # One write a line: the ranks share the launcher's stdout.
        print("[rank %d] %s\n" % (self.global_rank, text), end="", flush=True)

    def _run_batch(self, source, targets, sync):
        context = contextlib.nullcontext() if sync else self.model.no_sync()
        with context:
            output = self.model(source)
            loss = F.cross_entropy(output, targets) / self.args.grad_accum
            loss.backward()
        return loss

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        self.say("Epoch %d | Batchsize: %d | Steps: %d" % (epoch, b_sz, len(self.train_data)))
        self.train_data.sampler.set_epoch(epoch)
        micro = 0
        for source, targets in self.train_data:
            source = source.to(self.device, non_blocking=True)
            targets = targets.to(self.device, non_blocking=True)
            micro += 1
            loss = self._run_batch(source, targets, sync=micro % self.args.grad_accum == 0)
            if micro % self.args.grad_accum:
                continue
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.step += 1
            if self.step % self.args.log_every == 0:
                t0 = time.perf_counter()
                value = loss.item() * self.args.grad_accum
                if self.step > self.args.warmup_iters:
                    self.sync_wait += time.perf_counter() - t0
            now = time.perf_counter()
            self.times.append(now - self.end)
            self.end = now
            if self.step % self.args.log_every == 0:
                recent = self.times[-self.args.log_every:]
                self.say("epoch %d step %5d | loss %.4f | %.2f ms/iter" % (
                    epoch, self.step, value, 1000 * sum(recent) / len(recent)))
            if (self.args.iters is not None and self.step >= self.args.iters) or \
                    (self.args.seconds is not None and self.end - self.start >= self.args.seconds):
                self.done = True
                return

    def _evaluate(self):
        self.model.eval()
        counts = torch.zeros(2, device=self.device)
        with torch.no_grad():
            for source, targets in self.val_data:
                source, targets = source.to(self.device), targets.to(self.device)
                counts[0] += (self.model(source).argmax(dim=1) == targets).sum()
                counts[1] += len(targets)
        dist.all_reduce(counts)
        self.model.train()
        return (counts[0] / counts[1]).item()

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
        torch.save(snapshot, self.snapshot_path)
        self.say("Epoch %d | Training snapshot saved at %s" % (epoch, self.snapshot_path))

    def train(self, max_epochs):
        self.start = self.end = time.perf_counter()
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if self.done:
                break
            t0 = time.perf_counter()
            acc = self._evaluate()
            if self.global_rank == 0 and epoch % self.args.save_every == 0:
                self._save_snapshot(epoch)
            dist.barrier()
            self.say("epoch %d: val acc %.3f (eval, snapshot and barrier %.0f ms)" % (
                epoch, acc, 1000 * (time.perf_counter() - t0)))
            self.end = time.perf_counter()
        if self.device.type == "cuda":
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            self.times[-1] += time.perf_counter() - t0
        warm = self.args.warmup_iters if len(self.times) > self.args.warmup_iters else 0
        measured = self.times[warm:]
        self.say("RESULT script=ddp_tutorial rank=%d world_size=%d iters=%d warmup_iters=%d iter_ms_mean=%.3f "
                 "iter_ms_p50=%.3f elapsed_s=%.2f device=%s grad_accum=%d sync_wait_ms_per_iter=%.3f" % (
                     self.global_rank, dist.get_world_size(), self.step, warm,
                     1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
                     time.perf_counter() - self.start, self.device.type, self.args.grad_accum,
                     1000 * self.sync_wait / max(1, self.step - self.args.warmup_iters)))


def load_train_objs(args):
    train_set = MyTrainDataset(args.dataset_size, args.in_dim, args.num_classes, args.seed)
    val_set = MyTrainDataset(args.val_size, args.in_dim, args.num_classes, args.seed + 1)
    model = build_model(args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    return train_set, val_set, model, optimizer


def prepare_dataloader(dataset, batch_size, workers, pin, shuffle):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=pin, shuffle=False, num_workers=workers,
                      persistent_workers=workers > 0, drop_last=shuffle,
                      sampler=DistributedSampler(dataset, shuffle=shuffle))


def main(spawned_rank, args):
    """One rank.  spawned_rank: None under torchrun, the rank under --spawn."""
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    backend = "nccl" if args.device == "cuda" else "gloo"
    if spawned_rank is None:
        local_rank = int(os.environ["LOCAL_RANK"])
        init = {}
    else:
        local_rank = spawned_rank
        init = {"rank": spawned_rank, "world_size": args.spawn}
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(args.threads)
    dist.init_process_group(backend=backend, **init)
    torch.manual_seed(args.seed)
    train_set, val_set, model, optimizer = load_train_objs(args)
    pin = device.type == "cuda"
    train_data = prepare_dataloader(train_set, args.batch_size, args.workers, pin, shuffle=True)
    val_data = prepare_dataloader(val_set, args.batch_size * 2, 0, pin, shuffle=False)
    trainer = Trainer(model, train_data, val_data, optimizer, args, device.index or 0, device)
    if trainer.global_rank == 0:
        trainer.say("%d parameters, %d ranks, %s, %s, grad_accum %d, torch %s" % (
            sum(p.numel() for p in model.parameters()), dist.get_world_size(), backend, device, args.grad_accum,
            torch.__version__))
    trainer.train(args.total_epochs)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args():
    p = argparse.ArgumentParser(description="DDP as PyTorch's tutorial series writes it")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--total-epochs", type=int, default=1000, help="epochs at most (--iters/--seconds end sooner)")
    p.add_argument("--save-every", type=int, default=1, help="epochs between rank 0's snapshots")
    p.add_argument("--batch-size", type=int, default=256, help="per-rank micro-batch")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--in-dim", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--num-classes", type=int, default=100)
    p.add_argument("--dataset-size", type=int, default=65536, help="training samples (all ranks together)")
    p.add_argument("--val-size", type=int, default=4096)
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes per rank")
    p.add_argument("--threads", type=int, default=1, help="CPU: torch threads per rank")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--spawn", type=int, default=0, help="start this many ranks with torch.multiprocessing.spawn")
    p.add_argument("--iters", type=int, default=None, help="stop after this many optimizer steps")
    p.add_argument("--seconds", type=float, default=None, help="stop after this many seconds of training")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warmup-iters", type=int, default=3, help="optimizer steps left out of the final mean")
    p.add_argument("--snapshot-dir", default=None, help="default: a temporary directory, removed at the end")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 1000
    if args.grad_accum < 1:
        p.error("--grad-accum must be at least 1")
    return args


if __name__ == "__main__":
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="snapshot-") as tmp:
        if args.snapshot_dir is None:
            args.snapshot_dir = tmp
        if args.spawn > 0:
            import torch.multiprocessing as mp
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = str(free_port())
            mp.spawn(main, args=(args,), nprocs=args.spawn)
        else:
            main(None, args)
