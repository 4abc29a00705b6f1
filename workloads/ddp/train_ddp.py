#!/usr/bin/env python3
"""A small DistributedDataParallel training job on the CPU with gloo, one
process per rank (started by launch_ranks.py or torchrun).  A DataLoader
feeds each rank; `--slow-rank R --extra-preprocess-ms X` makes rank R spend
X ms more of CPU work preparing every batch (in its collate function, in
the training process: num_workers=0), so the other ranks wait for it in
DDP's gradient allreduce.  `--device cuda` trains on the GPU of index
LOCAL_RANK modulo the GPUs there are (ranks share a GPU when there are
fewer), still with gloo.  `--wait-before-start S` sleeps before the loop
(time for a tracer to attach); `--ready-file F`: rank 0 creates F when the
training loop starts.  Prints "rank R steps N mean_step_ms M" at the end.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.dataloader import default_collate


def busy_ms(ms):
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


class Samples(Dataset):
    def __init__(self, n, dim):
        self.n, self.dim = n, dim

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), torch.tensor(i % 10)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--extra-preprocess-ms", type=float, default=0.0)
    p.add_argument("--wait-before-start", type=float, default=0.0)
    p.add_argument("--ready-file", default="")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    model = DistributedDataParallel(nn.Sequential(
        nn.Linear(args.dim, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    extra = args.extra_preprocess_ms if rank == args.slow_rank else 0.0

    def collate(samples):
        if extra:
            busy_ms(extra)  # this rank's own extra preprocessing of the batch
        return default_collate(samples)

    loader = DataLoader(Samples(args.steps * args.batch, args.dim), batch_size=args.batch, num_workers=0,
                        collate_fn=collate)
    if args.wait_before_start > 0:
        time.sleep(args.wait_before_start)
    dist.barrier()
    if args.ready_file and rank == 0:
        open(args.ready_file, "w").close()
    start = time.perf_counter()
    steps = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        steps += 1
    elapsed = time.perf_counter() - start
    dist.barrier()
    print(f"rank {rank} steps {steps} mean_step_ms {1000 * elapsed / max(steps, 1):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
