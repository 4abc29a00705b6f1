#!/usr/bin/env python3
"""Unconditional diffusion training, as diffusers' train_unconditional.py writes it.

A small UNet (residual blocks with GroupNorm and SiLU, a sinusoidal timestep
embedding, skip connections from the down path to the up path) learns to
predict the noise a DDPM schedule added to random images served by a
DataLoader with --workers processes (random flips in the workers, as the
example's torchvision transforms do).  Per batch: noise and random
timesteps, the noisy images, the model's prediction, an MSE loss,
backward, clip_grad_norm_, AdamW, the cosine schedule with warm-up, and the
EMA model's update: diffusers' EMAModel.step, a loop over the parameters
(three small kernels each; --ema-foreach: torch._foreach_* instead) with
its warm-up decay.  The loss is read back every step for the progress bar's
postfix, as the example does.  Every --sample-every iterations the EMA
weights are swapped in and --sample-steps DDPM denoising steps make a batch
of samples (the example's "save images" epoch end), printed on its own line
and left out of the iteration time.

An iteration is one optimizer step: from the end of the previous one (or
of the sampling after it) to the end of this one, data loading included.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def parse_args():
    p = argparse.ArgumentParser(description="unconditional DDPM training with an EMA model (diffusers style)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--resolution", type=int, default=64)
    p.add_argument("--channels", type=int, default=64, help="channels of the first UNet level")
    p.add_argument("--levels", type=int, default=3, help="UNet resolution levels")
    p.add_argument("--train-batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--dataset-size", type=int, default=20000)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--lr-warmup-steps", type=int, default=50)
    p.add_argument("--num-train-timesteps", type=int, default=1000)
    p.add_argument("--ema-max-decay", type=float, default=0.9999)
    p.add_argument("--ema-foreach", action="store_true", help="update the EMA weights with torch._foreach_*")
    p.add_argument("--sample-every", type=int, default=100, help="iterations between sampling runs (0: never)")
    p.add_argument("--sample-steps", type=int, default=50, help="denoising steps of a sampling run")
    p.add_argument("--eval-batch-size", type=int, default=16)
    p.add_argument("--iters", type=int, default=None, help="optimizer steps")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 300
    return args


class RandomImages(Dataset):
    """Random RGB images in [-1, 1], flipped at random as the example's transforms do."""

    def __init__(self, size, resolution):
        self.size, self.resolution = size, resolution

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        image = torch.rand(3, self.resolution, self.resolution, generator=g) * 2 - 1
        if torch.rand(1).item() < 0.5:
            image = image.flip(-1)
        return {"input": image}


def timestep_embedding(timesteps, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=timesteps.device, dtype=torch.float32) / half)
    args = timesteps.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb_dim):
        super().__init__()
        self.norm1 = nn.GroupNorm(8, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb_dim, cout)
        self.norm2 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    def __init__(self, channels, levels):
        super().__init__()
        self.temb_dim = channels * 4
        self.time_mlp = nn.Sequential(nn.Linear(channels, self.temb_dim), nn.SiLU(),
                                      nn.Linear(self.temb_dim, self.temb_dim))
        self.conv_in = nn.Conv2d(3, channels, 3, padding=1)
        widths = [channels * min(2 ** i, 4) for i in range(levels)]
        self.down, self.downsample = nn.ModuleList(), nn.ModuleList()
        cin = channels
        for i, w in enumerate(widths):
            self.down.append(ResBlock(cin, w, self.temb_dim))
            self.downsample.append(nn.Conv2d(w, w, 3, stride=2, padding=1) if i < levels - 1 else nn.Identity())
            cin = w
        self.mid = ResBlock(cin, cin, self.temb_dim)
        self.up, self.upsample = nn.ModuleList(), nn.ModuleList()
        for i, w in reversed(list(enumerate(widths))):
            self.up.append(ResBlock(cin + w, w, self.temb_dim))
            self.upsample.append(nn.Upsample(scale_factor=2, mode="nearest") if i > 0 else nn.Identity())
            cin = w
        self.norm_out = nn.GroupNorm(8, cin)
        self.conv_out = nn.Conv2d(cin, 3, 3, padding=1)
        self.channels = channels

    def forward(self, x, timesteps):
        temb = self.time_mlp(timestep_embedding(timesteps, self.channels))
        h = self.conv_in(x)
        skips = []
        for block, down in zip(self.down, self.downsample):
            h = block(h, temb)
            skips.append(h)
            h = down(h)
        h = self.mid(h, temb)
        for block, up in zip(self.up, self.upsample):
            h = block(torch.cat([h, skips.pop()], dim=1), temb)
            h = up(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class DDPMScheduler:
    """The linear-beta DDPM schedule: add_noise for training, step for sampling."""

    def __init__(self, num_train_timesteps, device):
        self.num_train_timesteps = num_train_timesteps
        self.betas = torch.linspace(1e-4, 0.02, num_train_timesteps, device=device)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)

    def add_noise(self, original, noise, timesteps):
        sqrt_alpha_prod = self.alphas_cumprod[timesteps].sqrt()[:, None, None, None]
        sqrt_one_minus = (1 - self.alphas_cumprod[timesteps]).sqrt()[:, None, None, None]
        return sqrt_alpha_prod * original + sqrt_one_minus * noise

    def step(self, model_output, t, sample, generator):
        alpha_prod_t = self.alphas_cumprod[t]
        alpha_prod_prev = self.alphas_cumprod[t - 1] if t > 0 else torch.ones((), device=sample.device)
        beta_prod_t = 1 - alpha_prod_t
        pred_original = ((sample - beta_prod_t.sqrt() * model_output) / alpha_prod_t.sqrt()).clamp(-1, 1)
        coeff_orig = alpha_prod_prev.sqrt() * self.betas[t] / beta_prod_t
        coeff_cur = self.alphas[t].sqrt() * (1 - alpha_prod_prev) / beta_prod_t
        prev = coeff_orig * pred_original + coeff_cur * sample
        if t > 0:
            variance = (1 - alpha_prod_prev) / beta_prod_t * self.betas[t]
            noise = torch.randn(sample.shape, generator=generator, device="cpu").to(sample.device)
            prev = prev + variance.sqrt() * noise
        return prev


class EMAModel:
    """diffusers' EMAModel: shadow parameters, a warm-up decay, store/copy_to/restore."""

    def __init__(self, parameters, max_decay, foreach):
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.max_decay, self.foreach = max_decay, foreach
        self.optimization_step = 0
        self.temp_stored = None

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - 1)
        return min(self.max_decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def step(self, parameters):
        self.optimization_step += 1
        one_minus_decay = 1 - self.get_decay(self.optimization_step)
        params = [p for p in parameters]
        if self.foreach:
            grad_params = [p for p in params if p.requires_grad]
            shadows = [s for s, p in zip(self.shadow_params, params) if p.requires_grad]
            torch._foreach_sub_(shadows, torch._foreach_sub(shadows, grad_params), alpha=one_minus_decay)
        else:
            for s_param, param in zip(self.shadow_params, params):
                if param.requires_grad:
                    s_param.sub_(one_minus_decay * (s_param - param))
                else:
                    s_param.copy_(param)

    def store(self, parameters):
        self.temp_stored = [p.detach().clone() for p in parameters]

    def copy_to(self, parameters):
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.data)

    def restore(self, parameters):
        for c_param, param in zip(self.temp_stored, parameters):
            param.data.copy_(c_param.data)
        self.temp_stored = None


def cosine_schedule_with_warmup(optimizer, warmup, total):
    def lr_lambda(step):
        if step < warmup:
            return step / max(1, warmup)
        progress = (step - warmup) / max(1, total - warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


@torch.no_grad()
def sample_images(model, scheduler, args, device):
    generator = torch.Generator().manual_seed(args.seed)
    image = torch.randn((args.eval_batch_size, 3, args.resolution, args.resolution), generator=generator).to(device)
    stride = max(1, scheduler.num_train_timesteps // args.sample_steps)
    for t in range(scheduler.num_train_timesteps - 1, -1, -stride):
        timesteps = torch.full((image.shape[0],), t, device=device, dtype=torch.long)
        model_output = model(image, timesteps)
        image = scheduler.step(model_output, t, image, generator)
    return ((image / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).cpu()


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)

    model = UNet(args.channels, args.levels).to(device)
    ema_model = EMAModel(model.parameters(), args.ema_max_decay, args.ema_foreach)
    noise_scheduler = DDPMScheduler(args.num_train_timesteps, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.95, 0.999), weight_decay=1e-6,
                                  eps=1e-8)
    dataset = RandomImages(args.dataset_size, args.resolution)
    loader = DataLoader(dataset, batch_size=args.train_batch_size, shuffle=True, num_workers=args.workers,
                        pin_memory=device.type == "cuda", drop_last=True,
                        persistent_workers=args.workers > 0)
    total_steps = args.iters if args.iters is not None else 10 ** 6
    lr_scheduler = cosine_schedule_with_warmup(optimizer, args.lr_warmup_steps, total_steps)
    print("UNet %d levels x %d channels, %.1fM parameters, %dx%d images, batch %d, %d workers, EMA %s, %s, "
          "torch %s" % (args.levels, args.channels, sum(p.numel() for p in model.parameters()) / 1e6,
                        args.resolution, args.resolution, args.train_batch_size, args.workers,
                        "foreach" if args.ema_foreach else "loop", device, torch.__version__), flush=True)

    times = []
    global_step = 0
    start = time.perf_counter()
    end = start
    done = False
    epoch = 0
    while not done:
        model.train()
        for batch in loader:
            clean_images = batch["input"].to(device, non_blocking=True)
            noise = torch.randn(clean_images.shape, device=device)
            bsz = clean_images.shape[0]
            timesteps = torch.randint(0, noise_scheduler.num_train_timesteps, (bsz,), device=device).long()
            noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)

            model_output = model(noisy_images, timesteps)
            loss = F.mse_loss(model_output.float(), noise.float())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            ema_model.step(model.parameters())
            global_step += 1
            logs = {"loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0], "step": global_step}

            now = time.perf_counter()
            times.append(now - end)
            end = now
            if global_step % args.log_every == 0:
                recent = times[-args.log_every:]
                print("epoch %d step %d loss %.4f lr %.2e %.3f ms/iter" % (
                    epoch, global_step, logs["loss"], logs["lr"], 1000 * sum(recent) / len(recent)), flush=True)
            if (args.iters is not None and global_step >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
            if args.sample_every and global_step % args.sample_every == 0:
                ema_model.store(model.parameters())
                ema_model.copy_to(model.parameters())
                model.eval()
                images = sample_images(model, noise_scheduler, args, device)
                ema_model.restore(model.parameters())
                model.train()
                t1 = time.perf_counter()
                print("sampled %d images in %d steps in %.1f ms (mean %.1f)" % (
                    images.shape[0], args.sample_steps, 1000 * (t1 - end), images.float().mean().item()),
                    flush=True)
                end = t1
        epoch += 1

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=diffusion_ema iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              global_step, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
