#!/usr/bin/env python3
"""A one-stage detector trained the way YOLOv5's train.py writes its loop.

An `InfiniteDataLoader` (its workers live for the whole run, so no epoch
starts new ones) of synthetic images with 0 to `--max-boxes` boxes each and
YOLO's `collate_fn`; per batch the images are scaled to a random size from
0.5x to 1.5x `--img-size` in steps of the stride 32 (`--multi-scale`, then
`F.interpolate`), `torch.backends.cudnn.benchmark` on, so every new size is
tuned again; a small conv backbone with three detection heads, YOLO's
loss with its anchor matching (`build_targets`: many small indexing ops, a
varied number of targets), `autocast` and a `GradScaler` on CUDA.  The
optimizer steps once every `accumulate` batches (nominal batch size 64:
`accumulate = round(64 / --batch-size)`), counted in batches over the whole
run (`ni - last_opt_step >= accumulate`), so an optimizer step's batches can
straddle an epoch's end; during the first `--warmup-batches` batches
`accumulate` rises from 1 and the learning rate and momentum ramp up.  Each
update: unscale, `clip_grad_norm_`, `scaler.step`, `scaler.update`,
`zero_grad`, the EMA model's update.  Every batch the progress bar's text
formats the running mean loss (a tensor on the device: a sync).  After every
epoch the EMA model is validated (its own loader with workers, NMS per
image) and a checkpoint saved with `torch.save`: printed on its own line and
not part of an iteration.  An iteration is one optimizer step: its time runs
from the end of the previous one to the end of this one's EMA update.
"""
import argparse
import copy
import math
import os
import random
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def parse_args():
    p = argparse.ArgumentParser(description="YOLOv5-style detector training with multi-scale batches")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--img-size", type=int, default=320)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--dataset-size", type=int, default=2000)
    p.add_argument("--val-size", type=int, default=200)
    p.add_argument("--num-classes", type=int, default=20)
    p.add_argument("--max-boxes", type=int, default=12)
    p.add_argument("--width", type=int, default=32, help="channels of the first layer")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--multi-scale", dest="multi_scale", action="store_true", default=True)
    p.add_argument("--no-multi-scale", dest="multi_scale", action="store_false")
    p.add_argument("--warmup-batches", type=int, default=100, help="0: none")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--iters", type=int, default=None, help="optimizer steps")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=10, help="optimizer steps between log lines")
    p.add_argument("--warmup-iters", type=int, default=None,
                   help="optimizer steps left out of the final mean (default: those of the warm-up batches)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for name in ("img_size", "batch_size", "dataset_size", "val_size", "width", "epochs"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.img_size % 32:
        p.error("--img-size must be a multiple of 32")
    if args.dataset_size < args.batch_size:
        p.error("--dataset-size must hold at least one batch")
    if args.iters is None and args.seconds is None:
        args.iters = 300
    return args


class SyntheticDetection(Dataset):
    """Images as uint8 arrays with boxes (class, x, y, w, h; normalized)."""

    def __init__(self, n, img_size, num_classes, max_boxes, seed):
        rng = np.random.default_rng(seed)
        self.n = n
        self.img_size = img_size
        self.seeds = rng.integers(0, 2 ** 31, n)
        self.labels = []
        for _ in range(n):
            k = int(rng.integers(0, max_boxes + 1))
            wh = rng.uniform(0.05, 0.5, (k, 2))
            xy = rng.uniform(0, 1, (k, 2)) * (1 - wh) + wh / 2
            cls = rng.integers(0, num_classes, (k, 1))
            self.labels.append(np.concatenate([cls, xy, wh], 1).astype(np.float32))

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        rng = np.random.default_rng(self.seeds[index])
        img = rng.integers(0, 256, (self.img_size, self.img_size, 3), dtype=np.uint8)
        # augment_hsv's gain, and a horizontal flip
        gain = rng.uniform(0.6, 1.4, 3)
        img = np.clip(img.astype(np.float32) * gain, 0, 255).astype(np.uint8)
        labels = self.labels[index].copy()
        if random.random() < 0.5:
            img = np.fliplr(img)
            labels[:, 1] = 1 - labels[:, 1]
        out = torch.zeros((len(labels), 6))
        out[:, 1:] = torch.from_numpy(labels)
        img = np.ascontiguousarray(img.transpose((2, 0, 1)))
        return torch.from_numpy(img), out

    @staticmethod
    def collate_fn(batch):
        im, label = zip(*batch)
        for i, lb in enumerate(label):
            lb[:, 0] = i  # target image index for build_targets()
        return torch.stack(im, 0), torch.cat(label, 0)


class _RepeatSampler:
    def __init__(self, sampler):
        self.sampler = sampler

    def __iter__(self):
        while True:
            yield from iter(self.sampler)


class InfiniteDataLoader(DataLoader):
    """YOLOv5's loader that reuses its workers across epochs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "batch_sampler", _RepeatSampler(self.batch_sampler))
        self.iterator = super().__iter__()

    def __len__(self):
        return len(self.batch_sampler.sampler)

    def __iter__(self):
        for _ in range(len(self)):
            yield next(self.iterator)


def conv(c1, c2, k=1, s=1):
    return nn.Sequential(nn.Conv2d(c1, c2, k, s, k // 2, bias=False), nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03),
                         nn.SiLU())


class Detector(nn.Module):
    anchors = torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]],
                           dtype=torch.float32).view(3, 3, 2)
    strides = torch.tensor([8., 16., 32.])

    def __init__(self, nc, w):
        super().__init__()
        self.nc, self.no, self.na = nc, nc + 5, 3
        self.stem = nn.Sequential(conv(3, w, 6, 2), conv(w, 2 * w, 3, 2), conv(2 * w, 2 * w, 3))
        self.p3 = nn.Sequential(conv(2 * w, 4 * w, 3, 2), conv(4 * w, 4 * w, 3))
        self.p4 = nn.Sequential(conv(4 * w, 8 * w, 3, 2), conv(8 * w, 8 * w, 3))
        self.p5 = nn.Sequential(conv(8 * w, 16 * w, 3, 2), conv(16 * w, 16 * w, 1))
        self.heads = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in (4 * w, 8 * w, 16 * w))
        self.register_buffer("anchor_grid", self.anchors / self.strides.view(3, 1, 1))

    def forward(self, x):
        x3 = self.p3(self.stem(x))
        x4 = self.p4(x3)
        x5 = self.p5(x4)
        out = []
        for head, f in zip(self.heads, (x3, x4, x5)):
            y = head(f)
            bs, _, ny, nx = y.shape
            out.append(y.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous())
        return out


def bbox_iou(box1, box2, eps=1e-7):
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
    b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2
    b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2
    inter = (torch.min(b1_x2, b2_x2) - torch.max(b1_x1, b2_x1)).clamp(0) * \
            (torch.min(b1_y2, b2_y2) - torch.max(b1_y1, b2_y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1_x2, b2_x2) - torch.min(b1_x1, b2_x1)
    ch = torch.max(b1_y2, b2_y2) - torch.min(b1_y1, b2_y1)
    c_area = cw * ch + eps
    return iou - (c_area - union) / c_area  # GIoU


class ComputeLoss:
    """YOLOv5's loss: anchors matched by shape ratio, neighbouring cells."""

    def __init__(self, model):
        self.model = model
        self.bce = nn.BCEWithLogitsLoss()
        self.balance = [4.0, 1.0, 0.4]

    def __call__(self, p, targets):
        device = targets.device
        lcls, lbox, lobj = (torch.zeros(1, device=device) for _ in range(3))
        tcls, tbox, indices, anch = self.build_targets(p, targets)
        for i, pi in enumerate(p):
            b, a, gj, gi = indices[i]
            tobj = torch.zeros(pi.shape[:4], dtype=pi.dtype, device=device)
            if b.shape[0]:
                pxy, pwh, _, pcls = pi[b, a, gj, gi].split((2, 2, 1, self.model.nc), 1)
                pxy = pxy.sigmoid() * 2 - 0.5
                pwh = (pwh.sigmoid() * 2) ** 2 * anch[i]
                iou = bbox_iou(torch.cat((pxy, pwh), 1), tbox[i]).squeeze()
                lbox += (1.0 - iou).mean()
                tobj[b, a, gj, gi] = iou.detach().clamp(0).type(tobj.dtype)
                t = torch.zeros_like(pcls)
                t[range(b.shape[0]), tcls[i]] = 1.0
                lcls += self.bce(pcls, t)
            lobj += self.bce(pi[..., 4], tobj) * self.balance[i]
        bs = p[0].shape[0]
        return (lbox * 0.05 + lobj + lcls * 0.5) * bs, torch.cat((lbox, lobj, lcls)).detach()

    def build_targets(self, p, targets):
        na, nt = 3, targets.shape[0]
        tcls, tbox, indices, anch = [], [], [], []
        gain = torch.ones(7, device=targets.device)
        ai = torch.arange(na, device=targets.device).float().view(na, 1).repeat(1, nt)
        targets = torch.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)
        g = 0.5
        off = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], device=targets.device).float() * g
        for i in range(3):
            anchors, shape = self.model.anchor_grid[i], p[i].shape
            gain[2:6] = torch.tensor(shape)[[3, 2, 3, 2]]
            t = targets * gain
            if nt:
                r = t[..., 4:6] / anchors[:, None]
                j = torch.max(r, 1 / r).max(2)[0] < 4.0
                t = t[j]
                gxy = t[:, 2:4]
                gxi = gain[[2, 3]] - gxy
                j, k = ((gxy % 1 < g) & (gxy > 1)).T
                l, m = ((gxi % 1 < g) & (gxi > 1)).T
                j = torch.stack((torch.ones_like(j), j, k, l, m))
                t = t.repeat((5, 1, 1))[j]
                offsets = (torch.zeros_like(gxy)[None] + off[:, None])[j]
            else:
                t = targets[0]
                offsets = 0
            bc, gxy, gwh, a = t.chunk(4, 1)
            a, (b, c) = a.long().view(-1), bc.long().T
            gij = (gxy - offsets).long()
            gi, gj = gij.T
            gi = gi.clamp_(0, shape[3] - 1)
            gj = gj.clamp_(0, shape[2] - 1)
            indices.append((b, a, gj, gi))
            tbox.append(torch.cat((gxy - torch.stack((gi, gj), 1), gwh), 1))
            anch.append(anchors[a])
            tcls.append(c)
        return tcls, tbox, indices, anch


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=2000):
        self.ema = copy.deepcopy(model).eval()
        self.updates = 0
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        msd = model.state_dict()
        for k, v in self.ema.state_dict().items():
            if v.dtype.is_floating_point:
                v *= d
                v += (1 - d) * msd[k].detach()


def nms(boxes, scores, iou_thres):
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() and len(keep) < 300:
        i = order[0]
        keep.append(i)
        if order.numel() == 1:
            break
        ious = bbox_iou(boxes[i].expand(order.numel() - 1, 4), boxes[order[1:]]).squeeze(1)
        order = order[1:][ious < iou_thres]
    return torch.stack(keep) if keep else torch.zeros(0, dtype=torch.long)


def validate(model, loader, device, amp):
    model.eval()
    kept = 0
    with torch.no_grad():
        for imgs, _ in loader:
            imgs = imgs.to(device, non_blocking=True).float() / 255
            with torch.autocast(device.type, enabled=amp):
                out = model(imgs)
            pred = torch.cat([o.float().flatten(1, 3) for o in out], 1)
            for x in pred:  # per image: confidence filter, then NMS
                x = x[x[:, 4].sigmoid() > 0.25]
                if x.shape[0]:
                    kept += nms(x[:, :4], x[:, 4], 0.45).numel()
    return kept


def main():
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    amp = cuda

    train_set = SyntheticDetection(args.dataset_size, args.img_size, args.num_classes, args.max_boxes, args.seed)
    val_set = SyntheticDetection(args.val_size, args.img_size, args.num_classes, args.max_boxes, args.seed + 1)
    train_loader = InfiniteDataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                      pin_memory=cuda, collate_fn=SyntheticDetection.collate_fn)
    val_loader = DataLoader(val_set, batch_size=args.batch_size * 2, shuffle=False, num_workers=args.workers,
                            pin_memory=cuda, collate_fn=SyntheticDetection.collate_fn)
    model = Detector(args.num_classes, args.width).to(device)
    g_bn, g_w, g_b = [], [], []
    for m in model.modules():
        for name, p in m.named_parameters(recurse=False):
            if name == "bias":
                g_b.append(p)
            elif isinstance(m, nn.BatchNorm2d):
                g_bn.append(p)
            else:
                g_w.append(p)
    optimizer = torch.optim.SGD(g_b, lr=args.lr, momentum=0.937, nesterov=True)
    optimizer.add_param_group({"params": g_w, "weight_decay": 5e-4})
    optimizer.add_param_group({"params": g_bn, "weight_decay": 0.0})
    lf = lambda x: (1 - x / args.epochs) * (1.0 - 0.01) + 0.01  # noqa: E731
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lf)
    ema = ModelEMA(model)
    scaler = torch.cuda.amp.GradScaler(enabled=amp)
    compute_loss = ComputeLoss(model)
    ckpt_dir = tempfile.mkdtemp(prefix="yolo-")
    nb = len(train_loader)
    nw = args.warmup_batches
    nbs = 64
    accumulate = max(round(nbs / args.batch_size), 1)
    gs = 32
    print("%d images of %d px, batch %d, accumulate %d, %d workers, multi-scale %s, %s, torch %s" % (
        args.dataset_size, args.img_size, args.batch_size, accumulate, args.workers, args.multi_scale, device,
        torch.__version__), flush=True)

    times = []
    warmup_steps = 0
    last_opt_step = -1
    start = time.perf_counter()
    end = start
    done = False
    epoch = 0
    while not done and epoch < args.epochs:
        model.train()
        mloss = torch.zeros(3, device=device)
        for i, (imgs, targets) in enumerate(train_loader):
            ni = i + nb * epoch
            imgs = imgs.to(device, non_blocking=True).float() / 255
            if nw > 0 and ni <= nw:
                xi = [0, nw]
                accumulate = max(1, np.interp(ni, xi, [1, nbs / args.batch_size]).round())
                for j, x in enumerate(optimizer.param_groups):
                    x["lr"] = np.interp(ni, xi, [0.1 if j == 0 else 0.0, x["initial_lr"] * lf(epoch)])
                    x["momentum"] = np.interp(ni, xi, [0.8, 0.937])
            if args.multi_scale:
                sz = random.randrange(int(args.img_size * 0.5), int(args.img_size * 1.5) + gs) // gs * gs
                sf = sz / max(imgs.shape[2:])
                if sf != 1:
                    ns = [math.ceil(x * sf / gs) * gs for x in imgs.shape[2:]]
                    imgs = F.interpolate(imgs, size=ns, mode="bilinear", align_corners=False)
            with torch.autocast(device.type, enabled=amp):
                pred = model(imgs)
                loss, loss_items = compute_loss(pred, targets.to(device))
            scaler.scale(loss).backward()
            if ni - last_opt_step >= accumulate:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
                ema.update(model)
                last_opt_step = ni
                now = time.perf_counter()
                times.append(now - end)
                end = now
                if nw > 0 and ni <= nw:
                    warmup_steps = len(times)
                if len(times) % args.log_every == 0:
                    recent = times[-args.log_every:]
                    print("%d/%d  step %d  box %.4f obj %.4f cls %.4f  %d px  %.3f ms/iter" % (
                        epoch, args.epochs - 1, len(times), *mloss.tolist(), imgs.shape[-1],
                        1000 * sum(recent) / len(recent)), flush=True)
                if (args.iters is not None and len(times) >= args.iters) or \
                        (args.seconds is not None and now - start >= args.seconds):
                    done = True
                    break
            mloss = (mloss * i + loss_items) / (i + 1)
            # tqdm's description, formatted every batch from the device tensor
            desc = ("%10s" * 2 + "%10.4g" * 5) % (
                "%g/%g" % (epoch, args.epochs - 1), "%.3gG" % (torch.cuda.memory_reserved() / 1e9 if cuda else 0),
                *mloss, targets.shape[0], imgs.shape[-1])
            del desc
        if cuda:
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            if done:
                times[-1] += time.perf_counter() - t0
        scheduler.step()
        if done:
            break
        # The batches since the last update belong to the next one, which
        # straddles the epoch's end: their time is carried over it.
        carry = time.perf_counter() - end
        t0 = time.perf_counter()
        kept = validate(ema.ema, val_loader, device, amp)
        torch.save({"epoch": epoch, "ema": copy.deepcopy(ema.ema).half(), "updates": ema.updates,
                    "optimizer": optimizer.state_dict()}, os.path.join(ckpt_dir, "last.pt"))
        print("epoch %d validation %d boxes kept, validation and checkpoint %.1f ms" % (
            epoch, kept, 1000 * (time.perf_counter() - t0)), flush=True)
        end = time.perf_counter() - carry
        epoch += 1

    shutil.rmtree(ckpt_dir, ignore_errors=True)
    warm = args.warmup_iters if args.warmup_iters is not None else max(warmup_steps, 5)
    warm = warm if len(times) > warm else 0
    measured = times[warm:]
    print("RESULT script=yolo_multiscale iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              len(times), warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
