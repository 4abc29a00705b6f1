#!/usr/bin/env python3
"""Hogwild training as PyTorch's mnist_hogwild example writes it: one model
in shared memory (model.share_memory()), --num-processes training
processes started with torch.multiprocessing (mp.Process, the spawn start
method on CUDA), each with its own DataLoader (--workers processes, pinned
memory on CUDA), its own SGD with momentum and its own loop, updating the
shared weights without locks.  No torch.distributed: the processes are not
ranks, nothing synchronizes them, and on CUDA they share one GPU.  The
MNIST-sized data set is synthetic (random 1x28x28 images whose class is a
function of the pixels), so nothing is downloaded.  After training the main
process evaluates the model once.

Every training process prints its own lines, prefixed "[process P]": first
"pid N" (its process id), every
--log-interval batches "<X> ms/iter" (an iteration is one batch of that
process, data loading included), and last a RESULT line with process=P.
The main process prints the evaluation and a RESULT line for the job.
"""
import argparse
import os
import time

import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


class SyntheticMnist(Dataset):
    """Images whose class is the argmax of a fixed projection of the pixels."""

    def __init__(self, size, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.rand(size, 1, 28, 28, generator=g)
        w = torch.randn(28 * 28, 10, generator=g)
        self.labels = (self.images.view(size, -1) @ w).argmax(dim=1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return (self.images[i] - 0.1307) / 0.3081, self.labels[i]


def say(rank, text):
    # One write per line: the processes share stdout, and print's separate
    # write of the newline would let their lines interleave.
    print("[process %d] %s\n" % (rank, text), end="", flush=True)


def train(rank, args, model, device, dataset, dataloader_kwargs):
    say(rank, "pid %d" % os.getpid())
    torch.manual_seed(args.seed + rank)
    train_loader = DataLoader(dataset, **dataloader_kwargs)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    model.train()
    times, it, done = [], 0, False
    start = time.perf_counter()
    end = start
    epoch = 0
    while not done:
        epoch += 1
        for batch_idx, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            output = model(data.to(device))
            loss = F.nll_loss(output, target.to(device))
            loss.backward()
            optimizer.step()
            it += 1
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it % args.log_interval == 0:
                recent = times[-args.log_interval:]
                say(rank, "Train Epoch: %d [%d/%d]\tLoss: %.6f\t%.3f ms/iter" % (
                    epoch, batch_idx * len(data), len(train_loader.dataset), loss.item(),
                    1000 * sum(recent) / len(recent)))
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
    say(rank, "RESULT script=mnist_hogwild process=%d iters=%d warmup_iters=%d iter_ms_mean=%.3f "
        "iter_ms_p50=%.3f elapsed_s=%.2f device=%s" % (
            rank, it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
            time.perf_counter() - start, device.type))


def test(model, device, dataset, batch_size):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in DataLoader(dataset, batch_size=batch_size):
            correct += model(data.to(device)).argmax(dim=1).eq(target.to(device)).sum().item()
    return correct / len(dataset)


def parse_args():
    p = argparse.ArgumentParser(description="hogwild training of an MNIST-sized CNN")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--test-batch-size", type=int, default=1000)
    p.add_argument("--dataset-size", type=int, default=20000)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--num-processes", type=int, default=2)
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers of each training process")
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--iters", type=int, default=None, help="batches per training process")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--warmup-iters", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 300
    if args.num_processes < 1:
        p.error("--num-processes must be at least 1")
    return args


def main():
    args = parse_args()
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if use_cuda else "cpu")
    dataloader_kwargs = {"batch_size": args.batch_size, "shuffle": True, "num_workers": args.workers}
    if use_cuda:
        dataloader_kwargs["pin_memory"] = True
        mp.set_start_method("spawn", force=True)
    torch.manual_seed(args.seed)
    dataset = SyntheticMnist(args.dataset_size, args.seed)
    model = Net().to(device)
    model.share_memory()  # gradients are allocated lazily, so they are not shared here
    print("%d processes, batch %d, %d workers each, %s, torch %s" % (
        args.num_processes, args.batch_size, args.workers, device, torch.__version__), flush=True)

    start = time.perf_counter()
    processes = []
    for rank in range(args.num_processes):
        p = mp.Process(target=train, args=(rank, args, model, device, dataset, dataloader_kwargs))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    elapsed = time.perf_counter() - start
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        raise SystemExit("a training process failed: exit codes %s" % failed)
    accuracy = test(model, device, dataset, args.test_batch_size)
    print("Test set: accuracy %.1f%% (%.2f s of training)" % (100 * accuracy, elapsed), flush=True)


if __name__ == "__main__":
    main()
