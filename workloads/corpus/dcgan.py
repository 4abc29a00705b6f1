#!/usr/bin/env python3
"""A GAN trained the way PyTorch's DCGAN example writes it: two networks,
two optimizers, three backward passes and two optimizer steps per
iteration.

Per batch: the discriminator's gradients from a real batch
(errD_real.backward()) and from a generated one (errD_fake.backward(), on
fake.detach()), optimizerD.step(); then the generator's
(errG.backward()), optimizerG.step().  Adam with beta1 = 0.5, BCELoss,
DataLoader over torchvision's FakeData (random tensors without
torchvision) with --workers processes.  One iteration is one batch: both
updates.  With --n-critic K the discriminator is updated K times per
generator update (on K batches), as WGAN-style loops do; an iteration is
then one generator update.  With --gradient-penalty W the losses are
WGAN-GP's: the critic (no sigmoid) scores real and generated batches, and
a penalty on the norm of its gradient at points between them, taken with
torch.autograd.grad(create_graph=True), is added with weight W; then one
backward pass through that gradient.
"""
import argparse
import time

import torch
import torch.nn as nn


def generator(nz, ngf, nc, image_size):
    # 4x4 from the latent vector, then doubled until image_size.
    ups = max(1, image_size.bit_length() - 3)
    mult = 2 ** (ups - 1)
    layers = [nn.ConvTranspose2d(nz, ngf * mult, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * mult), nn.ReLU(True)]
    for _ in range(ups - 1):
        layers += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, 4, 2, 1, bias=False),
                   nn.BatchNorm2d(ngf * mult // 2), nn.ReLU(True)]
        mult //= 2
    layers += [nn.ConvTranspose2d(ngf * mult, nc, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)


def discriminator(ndf, nc, image_size, sigmoid=True):
    downs = max(1, image_size.bit_length() - 3)
    layers = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
    mult = 1
    for _ in range(downs - 1):
        layers += [nn.Conv2d(ndf * mult, ndf * mult * 2, 4, 2, 1, bias=False),
                   nn.BatchNorm2d(ndf * mult * 2), nn.LeakyReLU(0.2, inplace=True)]
        mult *= 2
    layers += [nn.Conv2d(ndf * mult, 1, 4, 1, 0, bias=False)] + ([nn.Sigmoid()] if sigmoid else [])
    return nn.Sequential(*layers)


def weights_init(m):
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif name.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def make_dataset(size, image_size, nc):
    try:
        import torchvision.datasets as dset
        import torchvision.transforms as transforms
        return dset.FakeData(size=size, image_size=(nc, image_size, image_size), num_classes=10,
                             transform=transforms.Compose([transforms.ToTensor(),
                                                           transforms.Normalize([0.5] * nc, [0.5] * nc)]))
    except ImportError:
        images = torch.rand(size, nc, image_size, image_size) * 2 - 1
        return torch.utils.data.TensorDataset(images, torch.zeros(size, dtype=torch.long))


def parse_args():
    p = argparse.ArgumentParser(description="DCGAN training loop")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--nz", type=int, default=100)
    p.add_argument("--ngf", type=int, default=64)
    p.add_argument("--ndf", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dataset-size", type=int, default=50000)
    p.add_argument("--n-critic", type=int, default=1, help="discriminator updates per generator update")
    p.add_argument("--gradient-penalty", type=float, default=0.0,
                   help="WGAN-GP: Wasserstein losses and a gradient penalty of this weight (0: DCGAN's BCE)")
    p.add_argument("--lr", type=float, default=0.0002)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 500
    if args.n_critic < 1:
        p.error("--n-critic must be at least 1")
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    nc = 3

    netG = generator(args.nz, args.ngf, nc, args.image_size).to(device)
    netG.apply(weights_init)
    gp_weight = args.gradient_penalty
    netD = discriminator(args.ndf, nc, args.image_size, sigmoid=gp_weight == 0).to(device)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))
    dataloader = torch.utils.data.DataLoader(make_dataset(args.dataset_size, args.image_size, nc),
                                             batch_size=args.batch_size, shuffle=True,
                                             num_workers=args.workers, drop_last=True)
    print("DCGAN %dx%d on %s, n_critic %d, torch %s" % (
        args.image_size, args.image_size, device, args.n_critic, torch.__version__), flush=True)

    times = []
    it = 0
    start = time.perf_counter()
    end = start
    done = False
    epoch = 0
    critic_updates = 0
    while not done:
        for data in dataloader:
            # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real = data[0].to(device)
            b_size = real.size(0)
            noise = torch.randn(b_size, args.nz, 1, 1, device=device)
            if gp_weight:
                fake = netG(noise)
                alpha = torch.rand(b_size, 1, 1, 1, device=device)
                mixed = (alpha * real + (1 - alpha) * fake.detach()).requires_grad_(True)
                grad, = torch.autograd.grad(netD(mixed).sum(), mixed, create_graph=True)
                penalty = ((grad.reshape(b_size, -1).norm(2, dim=1) - 1) ** 2).mean()
                errD = netD(fake.detach()).mean() - netD(real).mean() + gp_weight * penalty
                errD.backward()
            else:
                label = torch.full((b_size,), real_label, dtype=torch.float, device=device)
                output = netD(real).view(-1)
                errD_real = criterion(output, label)
                errD_real.backward()
                fake = netG(noise)
                label.fill_(fake_label)
                output = netD(fake.detach()).view(-1)
                errD_fake = criterion(output, label)
                errD_fake.backward()
                errD = errD_real + errD_fake
            optimizerD.step()
            critic_updates += 1
            if critic_updates % args.n_critic != 0:
                continue

            # (2) Update G: maximize log(D(G(z)))
            netG.zero_grad()
            if gp_weight:
                errG = -netD(fake).mean()
            else:
                label.fill_(real_label)
                output = netD(fake).view(-1)
                errG = criterion(output, label)
            errG.backward()
            optimizerG.step()

            it += 1
            if it % args.log_every == 0:
                loss_d, loss_g = errD.item(), errG.item()
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if it % args.log_every == 0:
                recent = times[-args.log_every:]
                print("[%d][%d] Loss_D: %.4f Loss_G: %.4f  %.2f ms/iter" % (
                    epoch, it, loss_d, loss_g, 1000 * sum(recent) / len(recent)), flush=True)
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
        epoch += 1

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=dcgan iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s n_critic=%d" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, args.n_critic), flush=True)


if __name__ == "__main__":
    main()
