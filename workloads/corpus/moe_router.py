#!/usr/bin/env python3
"""A small mixture-of-experts language model, trained the way nanoGPT's
train.py writes its loop, with the sparse MoE block as Hugging Face's
Mixtral (MixtralSparseMoeBlock) writes it.

Each block: LayerNorm, causal self-attention, LayerNorm, then a router
(a linear gate, softmax, top-k, the k weights renormalized) over
--experts SwiGLU experts.  --dispatch loop (the default, Mixtral's code):
for every expert, `torch.where(expert_mask[e])` finds its tokens, an
expert with none is skipped, the rest gather their tokens, run the expert
and `index_add_` the weighted outputs back; `torch.where` with one
argument is `nonzero`, whose result size the CPU reads from the GPU, so
the loop synchronizes with the GPU once per expert and layer.
--dispatch capacity: the tokens are scattered into a fixed-capacity slot
buffer per expert (Switch Transformer's dispatch, tokens over capacity
dropped), the experts run as one batched matmul over stacked weights, and
nothing reads a size back.  The loss adds the router's load-balancing
loss (Switch Transformer's, as transformers' load_balancing_loss_func).

The loop is nanoGPT's: batches drawn at random offsets from one token
array in memory (get_batch: torch.stack of slices, pinned and copied with
non_blocking on CUDA), a cosine learning rate with warm-up set on every
param group by hand, --accum-steps micro-batches an optimizer step with
loss / k, clip_grad_norm_, AdamW (fused on CUDA where the optimizer has
it), zero_grad(set_to_none=True), and the loss read back only on logging
iterations.

An iteration is one optimizer step: from the end of the previous one to
the end of this one, batch assembly included.
"""
import argparse
import inspect
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description="mixture-of-experts LM training (nanoGPT loop, Mixtral MoE block)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--block-size", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--ffn-mult", type=int, default=2, help="expert hidden size in multiples of n_embd")
    p.add_argument("--dispatch", choices=["loop", "capacity"], default="loop")
    p.add_argument("--capacity-factor", type=float, default=1.25)
    p.add_argument("--aux-loss-coef", type=float, default=0.01)
    p.add_argument("--accum-steps", type=int, default=1)
    p.add_argument("--train-tokens", type=int, default=2_000_000)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--min-lr", type=float, default=6e-5)
    p.add_argument("--lr-warmup-iters", type=int, default=20)
    p.add_argument("--lr-decay-iters", type=int, default=5000)
    p.add_argument("--iters", type=int, default=None, help="optimizer steps")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 300
    return args


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.n_head = n_head
        self.flash = hasattr(F, "scaled_dot_product_attention")

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Expert(nn.Module):
    """Mixtral's MixtralBlockSparseTop2MLP: w2(silu(w1 x) * w3 x)."""

    def __init__(self, n_embd, ffn):
        super().__init__()
        self.w1 = nn.Linear(n_embd, ffn, bias=False)
        self.w2 = nn.Linear(ffn, n_embd, bias=False)
        self.w3 = nn.Linear(n_embd, ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoeBlock(nn.Module):
    """Mixtral's MixtralSparseMoeBlock.forward: route, then loop over the experts."""

    def __init__(self, n_embd, ffn, num_experts, top_k):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.gate = nn.Linear(n_embd, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(n_embd, ffn) for _ in range(num_experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype,
                                          device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])
            if top_x.shape[0] == 0:
                continue
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


class CapacityMoeBlock(nn.Module):
    """Switch Transformer's dispatch: fixed-capacity slots per expert, no size read back."""

    def __init__(self, n_embd, ffn, num_experts, top_k, capacity_factor):
        super().__init__()
        self.num_experts, self.top_k, self.capacity_factor = num_experts, top_k, capacity_factor
        self.gate = nn.Linear(n_embd, num_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(num_experts, n_embd, ffn) / math.sqrt(n_embd))
        self.w3 = nn.Parameter(torch.randn(num_experts, n_embd, ffn) / math.sqrt(n_embd))
        self.w2 = nn.Parameter(torch.randn(num_experts, ffn, n_embd) / math.sqrt(ffn))

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        x = hidden_states.view(-1, hidden_dim)
        tokens = x.shape[0]
        capacity = int(math.ceil(tokens * self.top_k / self.num_experts * self.capacity_factor))
        router_logits = self.gate(x)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights = (routing_weights / routing_weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        # Choice-major order, so every token's first choice is placed before any second choice.
        choice_mask = F.one_hot(selected_experts.t().reshape(-1), self.num_experts)
        position = (torch.cumsum(choice_mask, dim=0) * choice_mask).sum(dim=1) - 1
        expert = selected_experts.t().reshape(-1)
        kept = position < capacity
        trash = self.num_experts * capacity
        slot = torch.where(kept, expert * capacity + position, torch.full_like(position, trash))
        token = torch.arange(tokens, device=x.device).repeat(self.top_k)
        buffer = x.new_zeros(trash + 1, hidden_dim).index_copy(0, slot, x[token])
        h = buffer[:trash].view(self.num_experts, capacity, hidden_dim)
        h = torch.bmm(F.silu(torch.bmm(h, self.w1)) * torch.bmm(h, self.w3), self.w2)
        out = torch.cat([h.reshape(trash, hidden_dim), h.new_zeros(1, hidden_dim)])[slot]
        weight = (routing_weights.t().reshape(-1) * kept.to(x.dtype))[:, None]
        final = torch.zeros_like(x).index_add(0, token, out * weight)
        return final.view(batch_size, sequence_length, hidden_dim), router_logits


class Block(nn.Module):
    def __init__(self, args):
        super().__init__()
        ffn = args.ffn_mult * args.n_embd
        self.ln_1 = nn.LayerNorm(args.n_embd)
        self.attn = CausalSelfAttention(args.n_embd, args.n_head)
        self.ln_2 = nn.LayerNorm(args.n_embd)
        if args.dispatch == "loop":
            self.moe = SparseMoeBlock(args.n_embd, ffn, args.experts, args.top_k)
        else:
            self.moe = CapacityMoeBlock(args.n_embd, ffn, args.experts, args.top_k, args.capacity_factor)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        moe_out, router_logits = self.moe(self.ln_2(x))
        return x + moe_out, router_logits


class MoeGPT(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.wte = nn.Embedding(args.vocab, args.n_embd)
        self.wpe = nn.Embedding(args.block_size, args.n_embd)
        self.blocks = nn.ModuleList([Block(args) for _ in range(args.n_layer)])
        self.ln_f = nn.LayerNorm(args.n_embd)
        self.lm_head = nn.Linear(args.n_embd, args.vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        self.num_experts, self.top_k = args.experts, args.top_k

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        all_router_logits = []
        for block in self.blocks:
            x, router_logits = block(x)
            all_router_logits.append(router_logits)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return loss, load_balancing_loss(all_router_logits, self.num_experts, self.top_k)


def load_balancing_loss(gate_logits, num_experts, top_k):
    """transformers' load_balancing_loss_func without an attention mask."""
    concatenated = torch.cat(gate_logits, dim=0)
    routing_weights = F.softmax(concatenated, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = F.one_hot(selected_experts, num_experts)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    return torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0)) * num_experts


def get_lr(it, args):
    if it < args.lr_warmup_iters:
        return args.lr * (it + 1) / (args.lr_warmup_iters + 1)
    if it > args.lr_decay_iters:
        return args.min_lr
    decay_ratio = (it - args.lr_warmup_iters) / (args.lr_decay_iters - args.lr_warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return args.min_lr + coeff * (args.lr - args.min_lr)


def configure_optimizer(model, lr, device_type):
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    use_fused = "fused" in inspect.signature(torch.optim.AdamW).parameters and device_type == "cuda"
    extra = {"fused": True} if use_fused else {}
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), **extra), use_fused


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device_type = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    device = torch.device(device_type)
    rng = np.random.default_rng(args.seed)
    train_data = rng.integers(0, args.vocab, size=args.train_tokens, dtype=np.uint16)

    def get_batch():
        ix = torch.randint(len(train_data) - args.block_size - 1, (args.batch_size,))
        x = torch.stack([torch.from_numpy(train_data[i:i + args.block_size].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(train_data[i + 1:i + 1 + args.block_size].astype(np.int64)) for i in ix])
        if device_type == "cuda":
            return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        return x, y

    model = MoeGPT(args).to(device)
    optimizer, fused = configure_optimizer(model, args.lr, device_type)
    print("MoE GPT %d layers x %d experts (top %d, %s dispatch), %.1fM parameters, batch %d x %d, accum %d, "
          "AdamW%s, %s, torch %s" % (
              args.n_layer, args.experts, args.top_k, args.dispatch, sum(p.numel() for p in model.parameters()) / 1e6,
              args.batch_size, args.block_size, args.accum_steps, " fused" if fused else "", device_type,
              torch.__version__), flush=True)

    times = []
    iter_num = 0
    start = time.perf_counter()
    end = start
    X, Y = get_batch()
    while True:
        lr = get_lr(iter_num, args)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        for micro_step in range(args.accum_steps):
            loss, aux_loss = model(X, Y)
            loss = (loss + args.aux_loss_coef * aux_loss) / args.accum_steps
            X, Y = get_batch()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1

        if iter_num % args.log_every == 0:
            lossf = loss.item() * args.accum_steps
        now = time.perf_counter()
        times.append(now - end)
        end = now
        if iter_num % args.log_every == 0:
            recent = times[-args.log_every:]
            print("iter %d: loss %.4f, lr %.2e, %.3f ms/iter" % (
                iter_num, lossf, lr, 1000 * sum(recent) / len(recent)), flush=True)
        if (args.iters is not None and iter_num >= args.iters) or \
                (args.seconds is not None and now - start >= args.seconds):
            break

    if device_type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=moe_router iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s dispatch=%s" % (
              iter_num, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device_type, args.dispatch), flush=True)


if __name__ == "__main__":
    main()
