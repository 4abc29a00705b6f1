#!/usr/bin/env python3
"""ImageNet-style training of ResNet-18 on torchvision's FakeData.

Written the way the classic ImageNet example is: a DataLoader with worker
processes and pinned memory, non-blocking copies to the GPU, SGD with
momentum and weight decay, cross-entropy, and a running average of the
iteration time printed every --print-freq iterations.  No profiler
annotations of any kind.

--prefetch stream copies the next batch on a side CUDA stream while the
current one trains (Apex's and timm's data_prefetcher); --prefetch thread
takes batches from the DataLoader and copies them to the device on a
background thread with a queue of two (prefetch_generator's
BackgroundGenerator with the copy moved into it).
"""
import argparse
import queue
import sys
import threading
import time

import torch
import torch.nn as nn

try:
    import torchvision
    import torchvision.transforms as transforms
except ImportError:  # some installs have torch without torchvision
    torchvision = None


class RandomImages(torch.utils.data.Dataset):
    """What FakeData gives, for installs without torchvision: a random image
    per index (seeded by the index) and a random label."""

    def __init__(self, size, image_size, num_classes):
        self.size, self.image_size, self.num_classes = size, image_size, num_classes

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        image = torch.rand(self.image_size, generator=g)
        image = (image - 0.45) / 0.225
        target = int(torch.randint(0, self.num_classes, (1,), generator=g))
        return image, target


class SmallCNN(nn.Module):
    """A stand-in for ResNet-18 when torchvision is missing."""

    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class AverageMeter:
    def __init__(self):
        self.val = self.sum = self.count = 0.0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / self.count if self.count else 0.0


def batches(loader, device, prefetch):
    """(images, target) on the device, copied as --prefetch says."""
    use_cuda = device.type == "cuda"
    if prefetch == "none" or (prefetch == "stream" and not use_cuda):
        for images, target in loader:
            yield images.to(device, non_blocking=True), target.to(device, non_blocking=True)
    elif prefetch == "stream":
        stream = torch.cuda.Stream()
        it = iter(loader)

        def preload():
            try:
                images, target = next(it)
            except StopIteration:
                return None
            with torch.cuda.stream(stream):
                return images.to(device, non_blocking=True), target.to(device, non_blocking=True)

        nxt = preload()
        while nxt is not None:
            torch.cuda.current_stream().wait_stream(stream)
            images, target = nxt
            images.record_stream(torch.cuda.current_stream())
            target.record_stream(torch.cuda.current_stream())
            nxt = preload()
            yield images, target
    else:
        done = object()
        q = queue.Queue(maxsize=2)
        stream = torch.cuda.Stream() if use_cuda else None

        def work():
            try:
                for images, target in loader:
                    if stream is None:
                        q.put((images, target, None))
                        continue
                    with torch.cuda.stream(stream):
                        images = images.to(device, non_blocking=True)
                        target = target.to(device, non_blocking=True)
                        ready = torch.cuda.Event()
                        ready.record(stream)
                    q.put((images, target, ready))
            finally:
                q.put(done)

        threading.Thread(target=work, daemon=True).start()
        while True:
            item = q.get()
            if item is done:
                return
            images, target, ready = item
            if ready is not None:
                torch.cuda.current_stream().wait_event(ready)
            yield images, target


def parse_args():
    p = argparse.ArgumentParser(description="ResNet-18 on FakeData (ImageNet-style)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--arch", choices=["resnet18", "small"], default="resnet18")
    p.add_argument("-b", "--batch-size", type=int, default=64)
    p.add_argument("-j", "--workers", type=int, default=4, help="DataLoader worker processes")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--dataset-size", type=int, default=1281167, help="images per epoch (ImageNet's by default)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    p.add_argument("--iters", type=int, default=None, help="stop after this many iterations")
    p.add_argument("--seconds", type=float, default=None, help="stop after this many seconds of training")
    p.add_argument("-p", "--print-freq", type=int, default=10)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--prefetch", choices=["none", "stream", "thread"], default="none",
                   help="copy the next batch ahead: on a side stream, or on a background thread")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 500
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    use_cuda = device.type == "cuda"
    if use_cuda:
        torch.backends.cudnn.benchmark = True

    if torchvision is not None:
        # Stored images a little larger than the crop (256 for 224), cropped
        # and flipped at random as the ImageNet example's train transform does.
        stored = args.image_size + args.image_size // 7
        normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        dataset = torchvision.datasets.FakeData(
            size=args.dataset_size, image_size=(3, stored, stored), num_classes=args.num_classes,
            transform=transforms.Compose([transforms.RandomResizedCrop(args.image_size),
                                          transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]))
    else:
        print("torchvision not found: random tensors instead of FakeData", file=sys.stderr)
        dataset = RandomImages(args.dataset_size, (3, args.image_size, args.image_size), args.num_classes)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
        pin_memory=use_cuda, drop_last=True)

    if args.arch == "resnet18" and torchvision is not None:
        model = torchvision.models.resnet18(num_classes=args.num_classes)
    else:
        model = SmallCNN(args.num_classes)
    model = model.to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)

    print("=> %s, batch %d, %d workers, %s, torch %s" % (
        args.arch, args.batch_size, args.workers, device, torch.__version__), flush=True)
    batch_time, data_time, losses = AverageMeter(), AverageMeter(), AverageMeter()
    times = []
    it = 0
    start = time.perf_counter()
    done = False
    epoch = 0
    while not done:
        model.train()
        end = time.perf_counter()
        for images, target in batches(loader, device, args.prefetch):
            data_time.update(time.perf_counter() - end)

            output = model(images)
            loss = criterion(output, target)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            it += 1
            if it % args.print_freq == 0:
                losses.update(loss.item(), images.size(0))
            now = time.perf_counter()
            times.append(now - end)
            batch_time.update(now - end)
            end = now
            if it % args.print_freq == 0:
                recent = sum(times[-args.print_freq:]) / args.print_freq
                print("Epoch: [%d][%d]\tTime %.3f (%.3f)\tData %.3f (%.3f)\tLoss %.4f (%.4f)\t%.2f ms/iter" % (
                    epoch, it, batch_time.val, batch_time.avg, data_time.val, data_time.avg,
                    losses.val, losses.avg, recent * 1000), flush=True)
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
        epoch += 1

    if use_cuda:
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=imagenet_resnet iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s loss=%.4f" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, losses.avg), flush=True)

if __name__ == "__main__":
    main()
