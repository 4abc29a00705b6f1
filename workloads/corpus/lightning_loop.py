#!/usr/bin/env python3
"""A training loop as PyTorch Lightning's Trainer runs a LightningModule,
without Lightning: its automatic optimization, written out.

The user writes `training_step`, `validation_step` and
`configure_optimizers`; the trainer's fit loop does the rest, as Lightning
2.x does it:
- Each batch's forward and backward pass run inside a closure.  On the
  batch that ends a group of `--accumulate-grad-batches` the closure is
  handed to `optimizer.step(closure=closure)`, so the forward and backward
  passes run inside the optimizer's step; on the other batches of the group
  the closure is called directly and the optimizer does not step.  An
  epoch's last batch ends a group however many it holds.
- `zero_grad` runs inside the closure of a group's first batch, after its
  training_step and before its backward pass.
- The learning-rate scheduler (OneCycleLR, `interval: "step"`) steps after
  each optimizer step.
- `self.log("train_loss", ..., prog_bar=True)` keeps the tensor; the
  progress bar reads it (`.item()`) every `--refresh-rate` batches.
- Every `--val-check-interval` optimizer steps, and at each epoch's end, a
  validation loop (`model.eval()`, `torch.no_grad()`, a loader of its own)
  and `ModelCheckpoint` saving the best model (`torch.save` of the state
  dict to a temporary directory): printed on its own line and left out of
  the iteration time.  Before training, the sanity check runs 2 validation
  batches.
- The training DataLoader has `--workers` processes that are not
  persistent (Lightning's default), so each epoch forks them again.

A small CNN (conv-BN-ReLU blocks) classifies random CIFAR-sized images,
AdamW.  An iteration is one optimizer step: from the end of the previous
one (or of the validation after it) to the end of this one, its
micro-batches and their loading included.
"""
import argparse
import os
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def parse_args():
    p = argparse.ArgumentParser(description="Lightning-style automatic optimization, written out")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--width", type=int, default=64, help="channels of the first block")
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--train-size", type=int, default=50000)
    p.add_argument("--val-size", type=int, default=2000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--accumulate-grad-batches", type=int, default=1)
    p.add_argument("--val-check-interval", type=int, default=100, help="optimizer steps between validations (0: "
                   "only at an epoch's end)")
    p.add_argument("--refresh-rate", type=int, default=1, help="batches between progress bar refreshes")
    p.add_argument("--iters", type=int, default=None, help="optimizer steps")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.accumulate_grad_batches < 1:
        p.error("--accumulate-grad-batches must be at least 1")
    if args.iters is None and args.seconds is None:
        args.iters = 400
    return args


class RandomImages(Dataset):
    def __init__(self, size, image_size, num_classes, seed):
        self.size, self.image_size, self.num_classes, self.seed = size, image_size, num_classes, seed

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(self.seed * 1000003 + index)
        image = torch.randn(3, self.image_size, self.image_size, generator=g)
        if torch.rand(1, generator=g).item() < 0.5:
            image = image.flip(-1)
        return image, int(torch.randint(0, self.num_classes, (1,), generator=g))


class LitClassifier(nn.Module):
    """What the user writes: the model and its steps (a LightningModule's hooks)."""

    def __init__(self, width, num_classes, lr, total_steps):
        super().__init__()
        self.lr, self.total_steps = lr, total_steps
        layers, cin = [], 3
        for cout in (width, width * 2, width * 4):
            layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                       nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                       nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, num_classes)
        self.logged = {}

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))

    def log(self, name, value, prog_bar=False):
        self.logged[name] = value.detach()

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits, y, reduction="sum"), (logits.argmax(1) == y).sum()

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=5e-4)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=self.lr, total_steps=self.total_steps + 1)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class Trainer:
    """Lightning's fit loop with automatic optimization, reduced to what a step does."""

    def __init__(self, args, device, ckpt_dir):
        self.args, self.device, self.ckpt_dir = args, device, ckpt_dir
        self.best = None

    def to_device(self, batch):
        return [t.to(self.device, non_blocking=True) for t in batch]

    def make_closure(self, model, optimizer, batch, batch_idx, first_of_group):
        def closure():
            loss = model.training_step(batch, batch_idx)
            if first_of_group:
                optimizer.zero_grad(set_to_none=True)
            loss.backward()
            return loss
        return closure

    def validate(self, model, loader, limit=None):
        model.eval()
        total_loss, correct, seen = 0.0, 0, 0
        with torch.no_grad():
            for i, batch in enumerate(loader):
                if limit is not None and i >= limit:
                    break
                x, y = self.to_device(batch)
                loss, right = model.validation_step((x, y), i)
                total_loss += loss.item()
                correct += right.item()
                seen += y.numel()
        model.train()
        return total_loss / max(1, seen), correct / max(1, seen)

    def checkpoint(self, model, val_loss, step):
        if self.best is None or val_loss < self.best:
            self.best = val_loss
            torch.save(model.state_dict(), os.path.join(self.ckpt_dir, "best.ckpt"))
            return "saved step %d" % step
        return "not better"

    def fit(self, model, train_set, val_set):
        args = self.args
        opt_config = model.configure_optimizers()
        optimizer, scheduler = opt_config["optimizer"], opt_config["lr_scheduler"]["scheduler"]
        pin = self.device.type == "cuda"
        train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                  pin_memory=pin, drop_last=True)
        val_loader = DataLoader(val_set, batch_size=args.batch_size * 2, num_workers=0, pin_memory=pin)
        print("sanity check: val_loss %.4f" % self.validate(model, val_loader, limit=2)[0], flush=True)

        k = args.accumulate_grad_batches
        times, step, epoch = [], 0, 0
        start = time.perf_counter()
        end = start
        done = False
        while not done:
            model.train()
            for batch_idx, batch in enumerate(train_loader):
                batch = self.to_device(batch)
                closure = self.make_closure(model, optimizer, batch, batch_idx, batch_idx % k == 0)
                # An epoch's last batch ends its group, as Lightning's _should_accumulate has it.
                accumulating = (batch_idx + 1) % k != 0 and batch_idx + 1 != len(train_loader)
                if accumulating:
                    closure()
                else:
                    optimizer.step(closure=closure)
                    scheduler.step()
                if batch_idx % args.refresh_rate == 0:
                    postfix = "loss=%.3f" % model.logged["train_loss"].item()
                if accumulating:
                    continue
                step += 1
                now = time.perf_counter()
                times.append(now - end)
                end = now
                if step % args.log_every == 0:
                    recent = times[-args.log_every:]
                    print("Epoch %d: step %d, %s, lr=%.2e, %.3f ms/iter" % (
                        epoch, step, postfix, scheduler.get_last_lr()[0], 1000 * sum(recent) / len(recent)),
                        flush=True)
                if (args.iters is not None and step >= args.iters) or \
                        (args.seconds is not None and now - start >= args.seconds):
                    done = True
                    break
                if args.val_check_interval and step % args.val_check_interval == 0:
                    end = self.validate_and_checkpoint(model, val_loader, step, epoch)
            if not done:
                end = self.validate_and_checkpoint(model, val_loader, step, epoch)
                epoch += 1
        if self.device.type == "cuda":
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            times[-1] += time.perf_counter() - t0
        return step, times, time.perf_counter() - start

    def validate_and_checkpoint(self, model, val_loader, step, epoch):
        t0 = time.perf_counter()
        val_loss, val_acc = self.validate(model, val_loader)
        saved = self.checkpoint(model, val_loss, step)
        t1 = time.perf_counter()
        print("Epoch %d: validation at step %d: val_loss %.4f val_acc %.3f (%s) in %.1f ms" % (
            epoch, step, val_loss, val_acc, saved, 1000 * (t1 - t0)), flush=True)
        return t1


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    total = args.iters if args.iters is not None else 10 ** 6
    model = LitClassifier(args.width, args.num_classes, args.lr, total).to(device)
    train_set = RandomImages(args.train_size, args.image_size, args.num_classes, args.seed)
    val_set = RandomImages(args.val_size, args.image_size, args.num_classes, args.seed + 1)
    print("CNN width %d, %.2fM parameters, %dx%d images, batch %d x %d accumulated, %d workers, %s, torch %s" % (
        args.width, sum(p.numel() for p in model.parameters()) / 1e6, args.image_size, args.image_size,
        args.batch_size, args.accumulate_grad_batches, args.workers, device, torch.__version__), flush=True)
    with tempfile.TemporaryDirectory(prefix="lightning_loop_ckpt.") as ckpt_dir:
        step, times, elapsed = Trainer(args, device, ckpt_dir).fit(model, train_set, val_set)
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=lightning_loop iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              step, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              elapsed, device.type), flush=True)


if __name__ == "__main__":
    main()
