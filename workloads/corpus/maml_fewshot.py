#!/usr/bin/env python3
"""Model-agnostic meta-learning (MAML) for few-shot classification, written
as the widely used PyTorch ports (dragen1860/MAML-Pytorch, learn2learn's
examples) write it: a functional network whose weights are passed in, an
inner loop of `torch.autograd.grad` calls per task, one outer update.

Per iteration (one meta-update): for each of --tasks tasks (N-way, K-shot,
sampled from a synthetic Omniglot-sized set held on the device), --inner-steps
steps of SGD on the task's support set, each a forward pass and
`torch.autograd.grad(loss, fast_weights, create_graph=True)` (second-order
MAML; `--first-order`: no graph through the gradient), then the query
set's loss at the adapted weights.  The tasks' query losses are averaged,
one `meta_loss.backward()` and `meta_optimizer.step()` (Adam).  So an
iteration makes tasks x inner-steps + 1 backward passes through autograd
and one optimizer step.

Every --eval-every iterations the model is evaluated on --eval-tasks new
tasks as MAML's "finetuning" does: --eval-inner-steps adaptation steps per
task (autograd.grad without a graph, no optimizer), query accuracy under
torch.no_grad().  That time is printed on its own line and left out of the
iteration time.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def init_weights(channels, in_ch, n_way, image_size, device):
    """Four conv3x3-BN-ReLU-maxpool blocks and a linear head, as a flat list
    of tensors (MAML's functional "vars")."""
    ws = []
    c = in_ch
    size = image_size
    for _ in range(4):
        w = torch.empty(channels, c, 3, 3, device=device)
        torch.nn.init.kaiming_normal_(w)
        ws += [w, torch.zeros(channels, device=device),  # conv weight, bias
               torch.ones(channels, device=device), torch.zeros(channels, device=device)]  # BN gamma, beta
        c = channels
        size = (size + 1) // 2 if size > 1 else 1  # forward's max-pool, ceil_mode
    head = torch.empty(n_way, channels * size * size, device=device)
    torch.nn.init.kaiming_normal_(head)
    ws += [head, torch.zeros(n_way, device=device)]
    return [w.requires_grad_() for w in ws]


def forward(x, ws):
    for b in range(4):
        w, bias, gamma, beta = ws[4 * b:4 * b + 4]
        x = F.conv2d(x, w, bias, padding=1)
        x = F.batch_norm(x, None, None, weight=gamma, bias=beta, training=True)
        x = F.max_pool2d(F.relu(x), 2, ceil_mode=True) if x.shape[-1] > 1 else F.relu(x)
    return F.linear(x.flatten(1), ws[-2], ws[-1])


class TaskSampler:
    """N-way K-shot tasks from a fixed set of classes of random prototypes
    plus noise (Omniglot's shape: 1x28x28 images, many classes)."""

    def __init__(self, classes, n_way, k_shot, k_query, image_size, device, seed):
        g = torch.Generator(device="cpu").manual_seed(seed)
        self.prototypes = torch.randn(classes, 1, image_size, image_size, generator=g).to(device)
        self.n_way, self.k_shot, self.k_query = n_way, k_shot, k_query
        self.device = device

    def sample(self, tasks):
        n, k, q = self.n_way, self.k_shot, self.k_query
        cls = torch.stack([torch.randperm(self.prototypes.shape[0], device=self.device)[:n] for _ in range(tasks)])
        protos = self.prototypes[cls]  # tasks x n x 1 x H x W
        def draw(m):
            x = protos.unsqueeze(2) + 0.5 * torch.randn(tasks, n, m, *protos.shape[2:], device=self.device)
            y = torch.arange(n, device=self.device).view(1, n, 1).expand(tasks, n, m)
            return x.reshape(tasks, n * m, *protos.shape[2:]), y.reshape(tasks, n * m)
        x_spt, y_spt = draw(k)
        x_qry, y_qry = draw(q)
        return x_spt, y_spt, x_qry, y_qry


def adapt(ws, x, y, steps, lr, create_graph):
    fast = ws
    for _ in range(steps):
        loss = F.cross_entropy(forward(x, fast), y)
        grads = torch.autograd.grad(loss, fast, create_graph=create_graph)
        fast = [w - lr * g for w, g in zip(fast, grads)]
    return fast


def parse_args():
    p = argparse.ArgumentParser(description="MAML few-shot training loop")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--n-way", type=int, default=5)
    p.add_argument("--k-shot", type=int, default=1)
    p.add_argument("--k-query", type=int, default=15)
    p.add_argument("--tasks", type=int, default=8, help="tasks per meta-update (meta-batch)")
    p.add_argument("--inner-steps", type=int, default=5)
    p.add_argument("--inner-lr", type=float, default=0.4)
    p.add_argument("--meta-lr", type=float, default=1e-3)
    p.add_argument("--first-order", action="store_true")
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--image-size", type=int, default=28)
    p.add_argument("--classes", type=int, default=1200)
    p.add_argument("--eval-every", type=int, default=100, help="meta-updates between evaluations (0: none)")
    p.add_argument("--eval-tasks", type=int, default=16)
    p.add_argument("--eval-inner-steps", type=int, default=10)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 300
    if min(args.n_way, args.k_shot, args.k_query, args.tasks, args.inner_steps) < 1 or args.classes < args.n_way:
        p.error("--n-way, --k-shot, --k-query, --tasks and --inner-steps must be >= 1, --classes >= --n-way")
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    ws = init_weights(args.channels, 1, args.n_way, args.image_size, device)
    meta_opt = torch.optim.Adam(ws, lr=args.meta_lr)
    train_tasks = TaskSampler(args.classes, args.n_way, args.k_shot, args.k_query, args.image_size, device,
                              args.seed)
    test_tasks = TaskSampler(args.classes // 4 + args.n_way, args.n_way, args.k_shot, args.k_query,
                             args.image_size, device, args.seed + 1)
    print("MAML %d-way %d-shot, %d tasks x %d inner steps (%s order) on %s, torch %s" % (
        args.n_way, args.k_shot, args.tasks, args.inner_steps, "first" if args.first_order else "second",
        device, torch.__version__), flush=True)

    def evaluate():
        x_spt, y_spt, x_qry, y_qry = test_tasks.sample(args.eval_tasks)
        correct = 0.0
        for i in range(args.eval_tasks):
            fast = adapt(ws, x_spt[i], y_spt[i], args.eval_inner_steps, args.inner_lr, create_graph=False)
            with torch.no_grad():
                correct += (forward(x_qry[i], fast).argmax(1) == y_qry[i]).float().mean().item()
        return correct / args.eval_tasks

    times = []
    it = 0
    start = time.perf_counter()
    end = start
    while True:
        x_spt, y_spt, x_qry, y_qry = train_tasks.sample(args.tasks)
        meta_opt.zero_grad()
        query_losses = []
        for i in range(args.tasks):
            fast = adapt(ws, x_spt[i], y_spt[i], args.inner_steps, args.inner_lr,
                         create_graph=not args.first_order)
            query_losses.append(F.cross_entropy(forward(x_qry[i], fast), y_qry[i]))
        meta_loss = torch.stack(query_losses).mean()
        meta_loss.backward()
        meta_opt.step()

        it += 1
        if it % args.log_every == 0:
            loss = meta_loss.item()
        now = time.perf_counter()
        times.append(now - end)
        end = now
        if it % args.log_every == 0:
            recent = times[-args.log_every:]
            print("step %d meta_loss %.4f  %.2f ms/iter" % (it, loss, 1000 * sum(recent) / len(recent)), flush=True)
        if args.eval_every and it % args.eval_every == 0:
            t0 = time.perf_counter()
            acc = evaluate()
            print("eval at step %d: query acc %.3f over %d tasks (%.0f ms)" % (
                it, acc, args.eval_tasks, 1000 * (time.perf_counter() - t0)), flush=True)
            end = time.perf_counter()
        if (args.iters is not None and it >= args.iters) or \
                (args.seconds is not None and now - start >= args.seconds):
            break

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=maml_fewshot iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s tasks=%d inner_steps=%d" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, args.tasks, args.inner_steps), flush=True)


if __name__ == "__main__":
    main()
