#!/usr/bin/env python3
"""Semi-supervised FixMatch as its PyTorch reimplementation (kekmodel's
FixMatch-pytorch) writes its training loop.

Two DataLoaders with `--workers` processes each: a small labeled set (weak
augmentation) and a large unlabeled set whose items are a weakly and a
strongly augmented view of one image (`TransformFixMatch`; the augmentation
runs in the workers, in Python).  The loop is counted in iterations, not
epochs: each iteration takes `next()` of both loaders' iterators, and where
one is exhausted it makes a new iterator, which shuts the old workers down
and forks new ones (`try: next(labeled_iter) except: labeled_iter =
iter(labeled_trainloader)`), so the labeled loader restarts every
`--num-labeled / --batch-size` iterations and the unlabeled one every
`--num-unlabeled / (--mu * --batch-size)`, in the middle of the run.  The
batches are concatenated and interleaved, one forward pass of a small
WideResNet, the pseudo-labels' confidence mask, `Lx + lambda_u * Lu`, one
backward, SGD with Nesterov, a cosine schedule, the EMA model's update, and
`model.zero_grad()`.  Every `--eval-step` iterations (FixMatch's "epoch") the
EMA model is tested on a test loader with workers and a checkpoint is saved
with `torch.save`; those are printed on their own lines and are not part of
an iteration.  An iteration's time runs from the end of the previous one to
the end of its `zero_grad()` and holds any loader restart it made.
"""
import argparse
import copy
import math
import os
import shutil
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def parse_args():
    p = argparse.ArgumentParser(description="FixMatch semi-supervised training on synthetic CIFAR-sized images")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--num-labeled", type=int, default=4000)
    p.add_argument("--num-unlabeled", type=int, default=50000)
    p.add_argument("--num-test", type=int, default=2000)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--mu", type=int, default=7, help="unlabeled batch is mu x batch size")
    p.add_argument("--width", type=int, default=2, help="WideResNet widen factor")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--eval-step", type=int, default=1024, help="iterations between evaluations")
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--threshold", type=float, default=0.95)
    p.add_argument("--lambda-u", type=float, default=1.0)
    p.add_argument("--T", type=float, default=1.0)
    p.add_argument("--ema-decay", type=float, default=0.999)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--print-freq", type=int, default=20)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args()
    for name in ("num_labeled", "num_unlabeled", "num_test", "batch_size", "mu", "width", "eval_step"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.num_labeled < args.batch_size or args.num_unlabeled < args.mu * args.batch_size:
        p.error("each set must hold at least one batch")
    if args.iters is None and args.seconds is None:
        args.iters = 2000
    return args


def random_crop_flip(img):
    """Weak augmentation: pad 4 (reflect), random 32x32 crop, horizontal flip."""
    c, h, w = img.shape
    padded = F.pad(img.unsqueeze(0), (4, 4, 4, 4), mode="reflect").squeeze(0)
    i, j = torch.randint(0, 9, (2,)).tolist()
    out = padded[:, i:i + h, j:j + w]
    if torch.rand(1).item() < 0.5:
        out = out.flip(2)
    return out


def rand_augment(img, n=2):
    """Strong augmentation: n random ops of RandAugment's pool, then Cutout."""
    for _ in range(n):
        op = torch.randint(0, 5, (1,)).item()
        m = torch.rand(1).item()
        if op == 0:
            img = (img * (0.5 + m)).clamp(0, 1)                           # brightness
        elif op == 1:
            mean = img.mean()
            img = ((img - mean) * (0.5 + m) + mean).clamp(0, 1)           # contrast
        elif op == 2:
            img = torch.where(img < m, img, 1 - img)                       # solarize
        elif op == 3:
            img = torch.roll(img, shifts=int(m * 8) - 4, dims=2)           # translate x
        else:
            bits = 8 - int(m * 4)
            img = torch.floor(img * (2 ** bits)) / (2 ** bits)             # posterize
    size = 16
    y, x = torch.randint(0, img.shape[1], (2,)).tolist()
    img = img.clone()
    img[:, max(0, y - size // 2):y + size // 2, max(0, x - size // 2):x + size // 2] = 0.5
    return img


NORMALIZE_MEAN = torch.tensor([0.4914, 0.4822, 0.4465]).view(3, 1, 1)
NORMALIZE_STD = torch.tensor([0.2471, 0.2435, 0.2616]).view(3, 1, 1)


def normalize(img):
    return (img - NORMALIZE_MEAN) / NORMALIZE_STD


class SyntheticCIFAR(Dataset):
    """uint8 images held in memory, as torchvision's CIFAR10 holds its arrays."""

    def __init__(self, n, num_classes, seed, mode):
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g)
        self.targets = torch.randint(0, num_classes, (n,), generator=g)
        self.mode = mode

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img = self.data[index].float() / 255
        target = self.targets[index]
        if self.mode == "weak":
            return normalize(random_crop_flip(img)), target
        if self.mode == "fixmatch":
            weak = random_crop_flip(img)
            strong = rand_augment(random_crop_flip(img))
            return (normalize(weak), normalize(strong)), target
        return normalize(img), target


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin, momentum=0.001)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, momentum=0.001)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        o = F.leaky_relu(self.bn1(x), 0.1)
        y = self.conv1(o)
        y = self.conv2(F.leaky_relu(self.bn2(y), 0.1))
        return y + (x if self.shortcut is None else self.shortcut(o))


class WideResNet(nn.Module):
    def __init__(self, num_classes, widen, blocks_per_group=1):
        super().__init__()
        ch = [16, 16 * widen, 32 * widen, 64 * widen]
        self.conv1 = nn.Conv2d(3, ch[0], 3, 1, 1, bias=False)
        layers = []
        for g in range(3):
            for b in range(blocks_per_group):
                layers.append(BasicBlock(ch[g] if b == 0 else ch[g + 1], ch[g + 1], (1 if g == 0 else 2) if b == 0 else 1))
        self.blocks = nn.Sequential(*layers)
        self.bn = nn.BatchNorm2d(ch[3], momentum=0.001)
        self.fc = nn.Linear(ch[3], num_classes)

    def forward(self, x):
        x = self.blocks(self.conv1(x))
        x = F.leaky_relu(self.bn(x), 0.1)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ModelEMA:
    def __init__(self, model, decay):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        self.param_keys = [k for k, _ in self.ema.named_parameters()]
        self.buffer_keys = [k for k, _ in self.ema.named_buffers()]
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            msd = model.state_dict()
            esd = self.ema.state_dict()
            for k in self.param_keys:
                esd[k].copy_(esd[k] * self.decay + (1. - self.decay) * msd[k].detach())
            for k in self.buffer_keys:
                esd[k].copy_(msd[k])


def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def cosine_schedule(optimizer, total_steps, warmup=0, cycles=7. / 16.):
    def lr_lambda(step):
        if step < warmup:
            return float(step) / float(max(1, warmup))
        progress = float(step - warmup) / float(max(1, total_steps - warmup))
        return max(0., math.cos(math.pi * cycles * progress))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def test(loader, model, device):
    correct = total = 0
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += (model(x).argmax(1) == y).sum().item()
            total += y.numel()
    return correct / total


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    cuda = device.type == "cuda"

    labeled_set = SyntheticCIFAR(args.num_labeled, args.num_classes, args.seed, "weak")
    unlabeled_set = SyntheticCIFAR(args.num_unlabeled, args.num_classes, args.seed + 1, "fixmatch")
    test_set = SyntheticCIFAR(args.num_test, args.num_classes, args.seed + 2, "test")
    labeled_trainloader = DataLoader(labeled_set, batch_size=args.batch_size, shuffle=True,
                                     num_workers=args.workers, pin_memory=cuda, drop_last=True)
    unlabeled_trainloader = DataLoader(unlabeled_set, batch_size=args.batch_size * args.mu, shuffle=True,
                                       num_workers=args.workers, pin_memory=cuda, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=args.batch_size, shuffle=False, num_workers=args.workers)

    model = WideResNet(args.num_classes, args.width).to(device)
    no_decay = ["bias", "bn"]
    grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": 5e-4},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0}]
    optimizer = torch.optim.SGD(grouped_parameters, lr=args.lr, momentum=0.9, nesterov=True)
    total_steps = args.iters if args.iters is not None else 2 ** 20
    scheduler = cosine_schedule(optimizer, total_steps)
    ema_model = ModelEMA(model, args.ema_decay)
    ckpt_dir = tempfile.mkdtemp(prefix="fixmatch-")
    print("%d labeled, %d unlabeled, batch %d + %d, %d workers per loader, %s, torch %s" % (
        args.num_labeled, args.num_unlabeled, args.batch_size, args.batch_size * args.mu, args.workers,
        device, torch.__version__), flush=True)

    labeled_iter = iter(labeled_trainloader)
    unlabeled_iter = iter(unlabeled_trainloader)
    model.train()
    times = []
    it = 0
    restarts = [0, 0]
    start = time.perf_counter()
    end = start
    done = False
    epoch = 0
    while not done:
        for batch_idx in range(args.eval_step):
            try:
                inputs_x, targets_x = next(labeled_iter)
            except StopIteration:
                labeled_iter = iter(labeled_trainloader)
                inputs_x, targets_x = next(labeled_iter)
                restarts[0] += 1
            try:
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)
            except StopIteration:
                unlabeled_iter = iter(unlabeled_trainloader)
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)
                restarts[1] += 1
            batch_size = inputs_x.shape[0]
            inputs = interleave(torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * args.mu + 1).to(device)
            targets_x = targets_x.to(device)
            logits = model(inputs)
            logits = de_interleave(logits, 2 * args.mu + 1)
            logits_x = logits[:batch_size]
            logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
            del logits
            Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
            pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
            max_probs, targets_u = torch.max(pseudo_label, dim=-1)
            mask = max_probs.ge(args.threshold).float()
            Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
            loss = Lx + args.lambda_u * Lu
            loss.backward()
            optimizer.step()
            scheduler.step()
            ema_model.update(model)
            model.zero_grad()
            it += 1
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it % args.print_freq == 0:
                recent = times[-args.print_freq:]
                print("Train Epoch: %d. Iter: %d/%d. LR: %.4f. Loss: %.4f. Loss_x: %.4f. Loss_u: %.4f. "
                      "Mask: %.2f. %.3f ms/iter" % (
                          epoch + 1, batch_idx + 1, args.eval_step, scheduler.get_last_lr()[0], loss.item(),
                          Lx.item(), Lu.item(), mask.mean().item(), 1000 * sum(recent) / len(recent)),
                      flush=True)
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
        if cuda:
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            times[-1] += time.perf_counter() - t0
        if done:
            break
        t0 = time.perf_counter()
        acc = test(test_loader, ema_model.ema, device)
        torch.save({"epoch": epoch + 1, "state_dict": model.state_dict(),
                    "ema_state_dict": ema_model.ema.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict()}, os.path.join(ckpt_dir, "checkpoint.pth.tar"))
        model.train()
        print("epoch %d top-1 acc %.2f, test and checkpoint %.1f ms" % (
            epoch + 1, 100 * acc, 1000 * (time.perf_counter() - t0)), flush=True)
        end = time.perf_counter()
        epoch += 1

    shutil.rmtree(ckpt_dir, ignore_errors=True)
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("loader restarts: labeled %d, unlabeled %d" % tuple(restarts), flush=True)
    print("RESULT script=fixmatch_semisup iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
