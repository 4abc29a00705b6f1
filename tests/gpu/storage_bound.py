#!/usr/bin/env python3
"""A training loop whose DataLoader reads every sample from storage the page
cache does not hold (O_DIRECT reads of --read-kib KiB from --file, as a data
set larger than memory reads them): the workload of storage_bound_check.sh.
A small CNN on CUDA (CPU without one), pinned batches, non_blocking copies;
prints "<X> ms/iter" every --log-every iterations."""
import argparse
import mmap
import os
import sys
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class DirectReads(Dataset):
    def __init__(self, path, read_kib, length):
        self.path, self.read_bytes, self.length = path, read_kib * 1024, length
        self.slots = os.path.getsize(path) // self.read_bytes
        self.fd = None

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if self.fd is None:  # per worker process, after the fork
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
            self.buf = mmap.mmap(-1, self.read_bytes)  # page-aligned, as O_DIRECT needs
        os.preadv(self.fd, [self.buf], (i * 7919 % self.slots) * self.read_bytes)
        x = torch.frombuffer(self.buf, dtype=torch.uint8, count=3 * 64 * 64).float().view(3, 64, 64) / 255
        return x, i % 10


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--file", required=True)
    p.add_argument("--read-kib", type=int, default=1024)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--log-every", type=int, default=20)
    a = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(DirectReads(a.file, a.read_kib, a.iters * a.batch_size), batch_size=a.batch_size,
                        shuffle=True, num_workers=a.workers, pin_memory=device == "cuda", persistent_workers=True)
    t0 = time.perf_counter()
    for it, (x, y) in enumerate(loader, 1):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % a.log_every == 0:
            loss.item()
            t1 = time.perf_counter()
            print("iter %d: %.3f ms/iter" % (it, (t1 - t0) * 1000 / a.log_every), flush=True)
            t0 = t1
    return 0


if __name__ == "__main__":
    sys.exit(main())
