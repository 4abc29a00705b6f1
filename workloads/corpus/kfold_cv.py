#!/usr/bin/env python3
"""K-fold cross-validation in one process, as Kaggle notebooks and tabular
baselines write it.

For each of `--folds` folds: a fresh MLP, Adam and a `OneCycleLR` schedule,
`DataLoader`s over `Subset`s of one in-memory `TensorDataset` (shuffled
training loader with `--workers` processes, a validation loader), then
`--epochs` epochs of training, each followed by a validation pass under
`model.eval()` and `torch.no_grad()` that prints the fold's score.  So the
optimizer, the model and the loaders are made again at every fold, and the
steps of one run come from several optimizers one after the other.  An
iteration is one training batch: its time runs from the end of the previous
batch of the same epoch (the epoch's first from the epoch's start, so it
holds the loader's start) to the end of its update; the validation passes
and the set-up of each fold are not part of it.
"""
import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Subset, TensorDataset


def parse_args():
    p = argparse.ArgumentParser(description="k-fold cross-validation of an MLP on tabular data")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--rows", type=int, default=60000)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--iters", type=int, default=None, help="training batches over all folds")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    if args.folds < 2:
        p.error("--folds must be at least 2")
    if args.iters is None and args.seconds is None:
        args.iters = 2000
    return args


def make_model(features, hidden):
    return nn.Sequential(
        nn.Linear(features, hidden), nn.BatchNorm1d(hidden), nn.SiLU(), nn.Dropout(0.1),
        nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.SiLU(), nn.Dropout(0.1),
        nn.Linear(hidden, 1))


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)

    X = torch.randn(args.rows, args.features)
    w = torch.randn(args.features, 1)
    y = ((X @ w).squeeze(1) + 0.5 * torch.randn(args.rows) > 0).float()
    dataset = TensorDataset(X, y)
    folds = torch.randperm(args.rows).chunk(args.folds)
    print("%d rows x %d features, %d folds, %d epochs, batch %d, %d workers, %s, torch %s" % (
        args.rows, args.features, args.folds, args.epochs, args.batch_size, args.workers, device,
        torch.__version__), flush=True)

    times = []
    it = 0
    start = time.perf_counter()
    done = False
    fold = 0
    while not done:
        k = fold % args.folds
        val_idx = folds[k]
        train_idx = torch.cat([f for j, f in enumerate(folds) if j != k])
        train_loader = DataLoader(Subset(dataset, train_idx.tolist()), batch_size=args.batch_size, shuffle=True,
                                  num_workers=args.workers, pin_memory=device.type == "cuda", drop_last=True)
        val_loader = DataLoader(Subset(dataset, val_idx.tolist()), batch_size=1024, shuffle=False)
        model = make_model(args.features, args.hidden).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, epochs=args.epochs,
                                                        steps_per_epoch=len(train_loader))
        criterion = nn.BCEWithLogitsLoss()
        for epoch in range(args.epochs):
            model.train()
            end = time.perf_counter()
            for xb, yb in train_loader:
                xb = xb.to(device, non_blocking=True)
                yb = yb.to(device, non_blocking=True)
                optimizer.zero_grad()
                loss = criterion(model(xb).squeeze(1), yb)
                loss.backward()
                optimizer.step()
                scheduler.step()
                it += 1
                now = time.perf_counter()
                times.append(now - end)
                end = now
                if it % args.log_every == 0:
                    recent = times[-args.log_every:]
                    print("fold %d epoch %d iter %d loss %.4f %.3f ms/iter" % (
                        k, epoch, it, loss.item(), 1000 * sum(recent) / len(recent)), flush=True)
                if (args.iters is not None and it >= args.iters) or \
                        (args.seconds is not None and now - start >= args.seconds):
                    done = True
                    break
            if device.type == "cuda":
                t0 = time.perf_counter()
                torch.cuda.synchronize()
                times[-1] += time.perf_counter() - t0
            if done:
                break
            model.eval()
            correct = total = 0
            with torch.no_grad():
                for xb, yb in val_loader:
                    xb, yb = xb.to(device), yb.to(device)
                    correct += ((model(xb).squeeze(1) > 0).float() == yb).sum().item()
                    total += yb.numel()
            print("fold %d epoch %d val_acc %.4f" % (k, epoch, correct / total), flush=True)
        fold += 1

    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=kfold_cv iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
