#!/usr/bin/env python3
"""Offline batch inference, as evaluation and scoring scripts write it.

A CNN classifier (ResNet-18 from torchvision; a small CNN without
torchvision) in eval mode scores a data set of random images served by a
DataLoader with --workers processes (pin_memory on CUDA, non_blocking
copies); each batch's forward pass runs under torch.inference_mode(), and
the top-5 classes and their probabilities are copied back to the CPU and
kept, as a script that writes predictions does.  No backward pass, no
optimizer: nothing a training loop's marks would show.

An iteration is one batch: from the end of the previous batch (its
predictions on the CPU) to the end of this one, data loading included.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def parse_args():
    p = argparse.ArgumentParser(description="offline batch inference")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--arch", choices=["resnet18", "small"], default="resnet18",
                   help="resnet18 needs torchvision; small is a 4-layer CNN")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("-b", "--batch-size", type=int, default=128)
    p.add_argument("-j", "--workers", type=int, default=4)
    p.add_argument("--dataset-size", type=int, default=50000)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--iters", type=int, default=None, help="batches")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 200
    return args


class RandomImages(Dataset):
    """Random images made per item, as a decoding dataset's CPU work is."""

    def __init__(self, size, image_size, num_classes):
        self.size, self.image_size, self.num_classes = size, image_size, num_classes

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        image = torch.rand(3, self.image_size, self.image_size, generator=g)
        image = (image - 0.45) / 0.225
        return image, index % self.num_classes


def small_cnn(num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, num_classes))


def build_model(args):
    if args.arch == "resnet18":
        try:
            import torchvision
            return torchvision.models.resnet18(num_classes=args.num_classes)
        except ImportError:
            print("torchvision not found: using the small CNN", flush=True)
    return small_cnn(args.num_classes)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    model = build_model(args).to(device).eval()
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    loader = DataLoader(RandomImages(args.dataset_size, args.image_size, args.num_classes),
                        batch_size=args.batch_size, shuffle=False, num_workers=args.workers,
                        pin_memory=device.type == "cuda", persistent_workers=args.workers > 0)
    print("%s, %d images of %d px, batch %d, %d workers, %s, torch %s" % (
        args.arch, args.dataset_size, args.image_size, args.batch_size, args.workers, device, torch.__version__),
        flush=True)

    predictions = []
    times = []
    correct = seen = 0
    it = 0
    start = time.perf_counter()
    end = start
    done = False
    while not done:
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            if args.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                probs = F.softmax(model(images), dim=1)
                top_p, top_c = probs.topk(5, dim=1)
            top_p, top_c = top_p.cpu(), top_c.cpu()
            predictions.append((top_c[:, 0].clone(), top_p[:, 0].clone()))
            correct += int((top_c[:, 0] == labels).sum())
            seen += labels.numel()

            it += 1
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it % args.log_every == 0:
                recent = times[-args.log_every:]
                print("batch %d scored %d top1 %.2f%% %.3f ms/iter" % (
                    it, seen, 100.0 * correct / seen, 1000 * sum(recent) / len(recent)), flush=True)
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break

    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=batch_inference iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
