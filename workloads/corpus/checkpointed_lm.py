#!/usr/bin/env python3
"""A small GPT-style causal language model fine-tuned the way Hugging Face
scripts do with gradient checkpointing on: every transformer block runs
under torch.utils.checkpoint, so the backward pass recomputes each block's
forward.  With --checkpoint reentrant (the default of transformers' older
gradient_checkpointing_enable() and of PyTorch's checkpoint before 2.4),
each block's backward calls torch.autograd.backward again from inside the
outer backward pass; with nonreentrant it does not; with none, no
checkpointing.

The loop is the run_clm_no_trainer loop: a DataLoader over fixed-length
token blocks, `outputs = model(batch)`, `loss.backward()`, gradient
clipping, AdamW, a linear schedule with warm-up, `optimizer.zero_grad()`.
With --dynamic-padding the examples have lengths from --block-size / 8 to
--block-size and each batch is padded to its longest (DataCollatorWithPadding's
way), so every batch has its own shape.  With --empty-cache the loop calls
torch.cuda.empty_cache() after every optimizer step, as memory-tight
fine-tuning scripts and notebooks do "to avoid OOM": the caching allocator
hands its free blocks back to the driver (cudaFree) and the next step
allocates them again (cudaMalloc).
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class TokenBlocks(torch.utils.data.Dataset):
    """Fixed-length blocks of a synthetic token stream (a Markov chain, so
    the loss falls)."""

    def __init__(self, n_blocks, block_size, vocab, seed, variable):
        g = torch.Generator().manual_seed(seed)
        steps = torch.randint(1, 4, (n_blocks * block_size,), generator=g)
        self.tokens = torch.cumsum(steps, 0) % vocab + 1  # 0 pads
        self.block_size = block_size
        self.lengths = (torch.randint(block_size // 8, block_size + 1, (n_blocks,), generator=g) if variable
                        else torch.full((n_blocks,), block_size))

    def __len__(self):
        return len(self.tokens) // self.block_size

    def __getitem__(self, i):
        return self.tokens[i * self.block_size:i * self.block_size + int(self.lengths[i])]


def pad_collate(examples):
    """Pads to the longest example of the batch; labels -100 on the padding."""
    longest = max(len(x) for x in examples)
    tokens = torch.zeros(len(examples), longest, dtype=torch.long)
    labels = torch.full((len(examples), longest), -100, dtype=torch.long)
    for row, x in enumerate(examples):
        tokens[row, :len(x)] = x
        labels[row, :len(x)] = x
    return tokens, labels


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class CausalLM(nn.Module):
    def __init__(self, vocab, block_size, d_model, n_head, n_layer, checkpoint):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.checkpoint = checkpoint
        self.register_buffer("mask", torch.triu(torch.full((block_size, block_size), float("-inf")), 1))

    def forward(self, tokens, labels):
        t = tokens.size(1)
        x = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))
        mask = self.mask[:t, :t]
        for block in self.blocks:
            if self.checkpoint != "none" and self.training:
                x = checkpoint_block(block, x, mask, self.checkpoint == "reentrant")
            else:
                x = block(x, mask)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),
                               ignore_index=-100)


def checkpoint_block(block, x, mask, reentrant):
    try:
        return torch.utils.checkpoint.checkpoint(block, x, mask, use_reentrant=reentrant)
    except TypeError:  # PyTorch before use_reentrant: always reentrant
        return torch.utils.checkpoint.checkpoint(block, x, mask)


def parse_args():
    p = argparse.ArgumentParser(description="causal LM fine-tuning with gradient checkpointing")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--checkpoint", choices=["reentrant", "nonreentrant", "none"], default="reentrant")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block-size", type=int, default=256)
    p.add_argument("--dynamic-padding", action="store_true", help="examples of varied length, batches padded to "
                   "their longest")
    p.add_argument("--empty-cache", action="store_true", help="torch.cuda.empty_cache() after every optimizer step")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--n-head", type=int, default=8)
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--train-blocks", type=int, default=20000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--lr-warmup", type=int, default=50, help="learning-rate warm-up steps")
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--warmup-iters", type=int, default=3, help="iterations left out of the final mean")
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
    model = CausalLM(args.vocab, args.block_size, args.d_model, args.n_head, args.n_layer, args.checkpoint)
    model.to(device).train()
    data = TokenBlocks(args.train_blocks, args.block_size, args.vocab - 1, args.seed, args.dynamic_padding)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                         collate_fn=pad_collate,
                                         num_workers=args.workers, pin_memory=device.type == "cuda",
                                         persistent_workers=args.workers > 0)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    total = args.iters or 10 ** 9
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / args.lr_warmup) * max(0.0, 1 - s / total))
    print("causal LM, %d layers, checkpoint %s, %s, torch %s" % (
        args.n_layer, args.checkpoint, device, torch.__version__), flush=True)

    times = []
    step = 0
    start = time.perf_counter()
    end = start
    done = False
    epoch = 0
    while not done:
        for tokens, labels in loader:
            tokens = tokens.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = model(tokens, labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            if args.empty_cache and device.type == "cuda":
                torch.cuda.empty_cache()

            step += 1
            if step % args.log_every == 0:
                loss_value = loss.item()
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if step % args.log_every == 0:
                recent = times[-args.log_every:]
                print("epoch %d step %d loss %.4f ppl %.1f lr %.2e | %.2f ms/iter" % (
                    epoch, step, loss_value, math.exp(min(loss_value, 20)), lr_scheduler.get_last_lr()[0],
                    1000 * sum(recent) / len(recent)), flush=True)
            if (args.iters is not None and step >= args.iters) or \
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
    print("RESULT script=checkpointed_lm iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s checkpoint=%s dynamic_padding=%d empty_cache=%d" % (
              step, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, args.checkpoint, int(args.dynamic_padding),
              int(args.empty_cache)), flush=True)


if __name__ == "__main__":
    main()
