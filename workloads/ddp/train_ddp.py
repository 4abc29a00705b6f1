#!/usr/bin/env python3
"""A DistributedDataParallel training job, one process per rank (started by
torchrun or launch_ranks.py, which set RANK, LOCAL_RANK, WORLD_SIZE...; or,
with `--spawn N`, by this script through torch.multiprocessing.spawn, as
PyTorch's DDP tutorial does: the rank is then an argument, in no
environment variable).

Two shapes, one loop:
- the default: a small MLP on the CPU with gloo (the CI's multi-rank tests);
- `--model resnet18 --device cuda --backend nccl`: ImageNet-style ResNet-18
  steps (torchvision, no weights) on the GPU of index LOCAL_RANK, fed by a
  DataLoader with `--workers` processes, pinned memory and non_blocking
  copies, gradients all-reduced by NCCL (the multi-GPU checks,
  tests/gpu/multi_gpu_nccl.sh).

A DataLoader feeds each rank; `--slow-rank R --extra-preprocess-ms X` makes
rank R spend X ms more of CPU work preparing every batch (in its collate
function: in the data workers, or in the training process when
--workers 0), so the other ranks wait for it in DDP's gradient allreduce.
With fewer GPUs than ranks, ranks share a GPU (LOCAL_RANK modulo the count).
`--wait-before-start S` sleeps before the loop (time for a tracer to
attach); `--ready-file F`: rank 0 creates F when the training loop starts.
Prints "rank R steps N mean_step_ms M loop_cpu_ms C" at the end, over the
steps after the first `--warmup`: C is the training thread's own CPU time
per step (a rank that needs more of it holds the others back).
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
    """Feature vectors for the MLP."""

    def __init__(self, n, dim):
        self.n, self.dim = n, dim

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), torch.tensor(i % 10)


class Images(Dataset):
    """uint8 images decoded from a small pool and normalized, as an
    ImageNet pipeline's last transforms do, without the disk."""

    def __init__(self, n, size):
        self.n = n
        g = torch.Generator().manual_seed(0)
        self.pool = torch.randint(0, 256, (16, 3, size, size), dtype=torch.uint8, generator=g)
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        image = self.pool[i % len(self.pool)].float().div_(255)
        if i % 2:
            image = image.flip(2)
        return (image - self.mean) / self.std, torch.tensor(i % 1000)


def build_model(args):
    if args.model == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=1000)
    return nn.Sequential(nn.Linear(args.dim, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden),
                         nn.ReLU(), nn.Linear(args.hidden, 10))


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=0, help="first steps left out of mean_step_ms")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--model", default="mlp", choices=["mlp", "resnet18"])
    p.add_argument("--dim", type=int, default=256, help="mlp: input features")
    p.add_argument("--hidden", type=int, default=512, help="mlp: hidden width")
    p.add_argument("--image-size", type=int, default=224, help="resnet18: image side")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--extra-preprocess-ms", type=float, default=0.0)
    p.add_argument("--wait-before-start", type=float, default=0.0)
    p.add_argument("--ready-file", default="")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--spawn", type=int, default=0, help="start this many ranks with torch.multiprocessing.spawn")
    args = p.parse_args()
    if args.spawn > 0:
        import torch.multiprocessing as mp
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        mp.spawn(train, args=(args,), nprocs=args.spawn, join=True)
    else:
        train(None, args)


def train(spawned_rank, args):
    """One rank's job; `spawned_rank` is None under torchrun's variables."""
    torch.set_num_threads(1)
    device = torch.device("cpu")
    local_rank = spawned_rank if spawned_rank is not None else int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    if spawned_rank is None:
        dist.init_process_group(args.backend)
    else:
        dist.init_process_group(args.backend, rank=spawned_rank, world_size=args.spawn)
    rank = dist.get_rank()
    model = DistributedDataParallel(build_model(args).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9 if args.model == "resnet18" else 0)
    extra = args.extra_preprocess_ms if rank == args.slow_rank else 0.0

    def collate(samples):
        if extra:
            busy_ms(extra)  # this rank's own extra preprocessing of the batch
        return default_collate(samples)

    n = args.steps * args.batch
    data = Images(n, args.image_size) if args.model == "resnet18" else Samples(n, args.dim)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers, collate_fn=collate,
                        pin_memory=args.device == "cuda", persistent_workers=args.workers > 0)
    if args.wait_before_start > 0:
        time.sleep(args.wait_before_start)
    dist.barrier()
    if args.ready_file and rank == 0:
        open(args.ready_file, "w").close()
    start, cpu_start = time.perf_counter(), time.thread_time()
    steps = 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        steps += 1
        if steps == args.warmup:
            if args.device == "cuda":
                torch.cuda.synchronize()
            start, cpu_start = time.perf_counter(), time.thread_time()
    if args.device == "cuda":
        torch.cuda.synchronize()
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
    dist.barrier()
    measured = steps - min(args.warmup, steps)
    print(f"rank {rank} steps {steps} mean_step_ms {1000 * elapsed / max(measured, 1):.3f} "
          f"loop_cpu_ms {1000 * cpu / max(measured, 1):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
