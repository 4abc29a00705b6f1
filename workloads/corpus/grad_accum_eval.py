#!/usr/bin/env python3
"""Gradient accumulation with periodic evaluation and checkpoints.

A small Transformer encoder classifies synthetic token sequences.  Each
optimizer step accumulates --accum-steps micro-batches from a DataLoader
(loss scaled by 1/k, gradients clipped, AdamW with a warm-up schedule);
every --eval-every optimizer steps the model is evaluated on a held-out
set (model.eval(), torch.no_grad()), and every --ckpt-every steps a
checkpoint is written with torch.save to a temporary directory.  The
iteration time printed is per optimizer step, evaluation and checkpoint
time left out (they are timed and printed on their own lines).
"""
import argparse
import os
import tempfile
import time

import torch
import torch.nn as nn


class SyntheticSequences(torch.utils.data.Dataset):
    """Token sequences whose label is a function of the tokens (learnable)."""

    def __init__(self, n, seq_len, vocab, num_classes, seed):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, vocab, (n, seq_len), generator=g)
        self.labels = (self.tokens[:, :4].sum(dim=1) * 7 + self.tokens[:, -1]) % num_classes

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


class Classifier(nn.Module):
    def __init__(self, vocab, d_model, nhead, nlayers, seq_len, num_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, nlayers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, :tokens.size(1)]
        x = self.encoder(x)
        return self.head(self.norm(x.mean(dim=1)))


def parse_args():
    p = argparse.ArgumentParser(description="gradient accumulation + periodic eval + checkpoints")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--accum-steps", type=int, default=4, help="micro-batches per optimizer step")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--nhead", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--num-classes", type=int, default=16)
    p.add_argument("--train-size", type=int, default=20000)
    p.add_argument("--val-size", type=int, default=1024)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup-steps", type=int, default=100, help="learning-rate warm-up (optimizer steps)")
    p.add_argument("--eval-every", type=int, default=50, help="optimizer steps between evaluations")
    p.add_argument("--ckpt-every", type=int, default=200, help="optimizer steps between checkpoints")
    p.add_argument("--iters", type=int, default=None, help="stop after this many optimizer steps")
    p.add_argument("--seconds", type=float, default=None, help="stop after this many seconds of training")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warmup-iters", type=int, default=3, help="optimizer steps left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 1000
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)

    train_set = SyntheticSequences(args.train_size, args.seq_len, args.vocab, args.num_classes, args.seed)
    val_set = SyntheticSequences(args.val_size, args.seq_len, args.vocab, args.num_classes, args.seed + 1)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.micro_batch, shuffle=True,
                                               num_workers=args.workers, drop_last=True,
                                               pin_memory=device.type == "cuda",
                                               persistent_workers=args.workers > 0)
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=args.micro_batch * 2)
    model = Classifier(args.vocab, args.d_model, args.nhead, args.layers, args.seq_len,
                       args.num_classes).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / args.warmup_steps))
    criterion = nn.CrossEntropyLoss()
    ckpt_dir = tempfile.mkdtemp(prefix="ckpt-")
    print("%d parameters, %d micro-batches of %d per step, %s, torch %s, checkpoints in %s" % (
        sum(p.numel() for p in model.parameters()), args.accum_steps, args.micro_batch, device,
        torch.__version__, ckpt_dir), flush=True)

    def evaluate():
        model.eval()
        correct = total = 0
        loss_sum = 0.0
        with torch.no_grad():
            for tokens, labels in val_loader:
                tokens, labels = tokens.to(device), labels.to(device)
                logits = model(tokens)
                loss_sum += criterion(logits, labels).item() * len(labels)
                correct += (logits.argmax(dim=1) == labels).sum().item()
                total += len(labels)
        model.train()
        return loss_sum / total, correct / total

    times = []
    step = 0
    micro = 0
    running = 0.0
    start = time.perf_counter()
    end = start
    done = False
    model.train()
    optimizer.zero_grad()
    while not done:
        for tokens, labels in train_loader:
            tokens = tokens.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = criterion(model(tokens), labels) / args.accum_steps
            loss.backward()
            micro += 1
            if micro % args.accum_steps != 0:
                continue
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            if step % args.log_every == 0:
                running = loss.item() * args.accum_steps
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if step % args.log_every == 0:
                recent = times[-args.log_every:]
                print("step %5d | loss %.4f | lr %.2e | %.2f ms/iter" % (
                    step, running, scheduler.get_last_lr()[0], 1000 * sum(recent) / len(recent)), flush=True)
            if step % args.eval_every == 0:
                t0 = time.perf_counter()
                val_loss, acc = evaluate()
                print("eval at step %d: val_loss %.4f acc %.3f (%.0f ms)" % (
                    step, val_loss, acc, 1000 * (time.perf_counter() - t0)), flush=True)
                end = time.perf_counter()
            if step % args.ckpt_every == 0:
                t0 = time.perf_counter()
                path = os.path.join(ckpt_dir, "checkpoint.pt")
                torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict()}, path)
                print("saved %s at step %d (%.0f ms)" % (path, step, 1000 * (time.perf_counter() - t0)),
                      flush=True)
                end = time.perf_counter()
            if (args.iters is not None and step >= args.iters) or \
                    (args.seconds is not None and end - start >= args.seconds):
                done = True
                break

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    for name in os.listdir(ckpt_dir):
        os.remove(os.path.join(ckpt_dir, name))
    os.rmdir(ckpt_dir)
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=grad_accum_eval iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s micro_batches=%d accum_steps=%d" % (
              step, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, micro, args.accum_steps), flush=True)


if __name__ == "__main__":
    main()
