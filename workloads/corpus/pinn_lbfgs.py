#!/usr/bin/env python3
"""A physics-informed neural network fitted with L-BFGS, as the PyTorch
ports of Raissi's PINNs (Burgers' equation) write it.

A `PhysicsInformedNN` class holds a tanh MLP u(x, t), boundary and initial
points with their values, and collocation points where the PDE residual
u_t + u u_x - nu u_xx is taken with three `torch.autograd.grad(...,
create_graph=True)` calls.  The whole fit is one
`optimizer.step(self.loss_func)` of `torch.optim.LBFGS(max_iter=...,
line_search_fn="strong_wolfe")`: the closure zeroes the gradients, computes
both losses, calls `loss.backward()`, counts `self.iter` and prints every
`--log-every` calls.  An iteration is one call of the closure (what the
script counts and prints); the strong-Wolfe line search calls it one or
more times per L-BFGS iteration.  Should L-BFGS stop early (its tolerances),
it is stepped again until `--iters` closure calls are done.
"""
import argparse
import math
import time

import torch


class StopTraining(Exception):
    pass


def parse_args():
    p = argparse.ArgumentParser(description="PINN for Burgers' equation fitted with L-BFGS")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--layers", type=int, default=8, help="hidden layers")
    p.add_argument("--width", type=int, default=20)
    p.add_argument("--n-u", type=int, default=100, help="initial and boundary points")
    p.add_argument("--n-f", type=int, default=10000, help="collocation points")
    p.add_argument("--nu", type=float, default=0.01 / math.pi)
    p.add_argument("--history-size", type=int, default=50)
    p.add_argument("--iters", type=int, default=None, help="closure calls")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 5000
    return args


class DNN(torch.nn.Module):
    def __init__(self, layers):
        super(DNN, self).__init__()
        modules = []
        for i in range(len(layers) - 2):
            modules.append(torch.nn.Linear(layers[i], layers[i + 1]))
            modules.append(torch.nn.Tanh())
        modules.append(torch.nn.Linear(layers[-2], layers[-1]))
        self.layers = torch.nn.Sequential(*modules)

    def forward(self, x):
        return self.layers(x)


class PhysicsInformedNN():
    def __init__(self, X_u, u, X_f, layers, nu, args, device):
        self.args = args
        self.x_u = X_u[:, 0:1].clone().to(device).requires_grad_(True)
        self.t_u = X_u[:, 1:2].clone().to(device).requires_grad_(True)
        self.x_f = X_f[:, 0:1].clone().to(device).requires_grad_(True)
        self.t_f = X_f[:, 1:2].clone().to(device).requires_grad_(True)
        self.u = u.to(device)
        self.nu = nu
        self.dnn = DNN(layers).to(device)
        self.optimizer = torch.optim.LBFGS(
            self.dnn.parameters(), lr=1.0, max_iter=args.iters or 10 ** 9, max_eval=None,
            history_size=args.history_size, tolerance_grad=1e-9, tolerance_change=1e-12,
            line_search_fn="strong_wolfe")
        self.iter = 0
        self.times = []
        self.start = None
        self.end = None

    def net_u(self, x, t):
        return self.dnn(torch.cat([x, t], dim=1))

    def net_f(self, x, t):
        u = self.net_u(x, t)
        u_t = torch.autograd.grad(u, t, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_x = torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_xx = torch.autograd.grad(u_x, x, grad_outputs=torch.ones_like(u_x), retain_graph=True,
                                   create_graph=True)[0]
        return u_t + u * u_x - self.nu * u_xx

    def loss_func(self):
        if self.args.iters is not None and self.iter >= self.args.iters:
            raise StopTraining()
        if self.args.seconds is not None and time.perf_counter() - self.start >= self.args.seconds:
            raise StopTraining()
        self.optimizer.zero_grad()
        u_pred = self.net_u(self.x_u, self.t_u)
        f_pred = self.net_f(self.x_f, self.t_f)
        loss_u = torch.mean((self.u - u_pred) ** 2)
        loss_f = torch.mean(f_pred ** 2)
        loss = loss_u + loss_f
        loss.backward()
        self.iter += 1
        now = time.perf_counter()
        self.times.append(now - self.end)
        self.end = now
        if self.iter % self.args.log_every == 0:
            recent = self.times[-self.args.log_every:]
            print("Iter %d, Loss: %.5e, Loss_u: %.5e, Loss_f: %.5e, %.3f ms/iter" % (
                self.iter, loss.item(), loss_u.item(), loss_f.item(), 1000 * sum(recent) / len(recent)),
                flush=True)
        return loss

    def train(self):
        self.dnn.train()
        self.start = self.end = time.perf_counter()
        try:
            while True:
                self.optimizer.step(self.loss_func)
        except StopTraining:
            pass


def training_points(args, generator):
    # Initial condition u(x, 0) = -sin(pi x) and boundaries u(+-1, t) = 0
    # on x in [-1, 1], t in [0, 1]; collocation points uniform inside.
    n0 = args.n_u // 2
    x0 = torch.rand(n0, 1, generator=generator) * 2 - 1
    X0 = torch.cat([x0, torch.zeros_like(x0)], dim=1)
    u0 = -torch.sin(math.pi * x0)
    nb = args.n_u - n0
    tb = torch.rand(nb, 1, generator=generator)
    xb = torch.where(torch.rand(nb, 1, generator=generator) < 0.5, -torch.ones(nb, 1), torch.ones(nb, 1))
    Xb = torch.cat([xb, tb], dim=1)
    X_u = torch.cat([X0, Xb])
    u = torch.cat([u0, torch.zeros(nb, 1)])
    X_f = torch.cat([torch.rand(args.n_f, 1, generator=generator) * 2 - 1,
                     torch.rand(args.n_f, 1, generator=generator)], dim=1)
    return X_u, u, X_f


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    X_u, u, X_f = training_points(args, torch.Generator().manual_seed(args.seed))
    layers = [2] + [args.width] * args.layers + [1]
    model = PhysicsInformedNN(X_u, u, X_f, layers, args.nu, args, device)
    print("PINN Burgers: %d layers x %d, %d boundary and %d collocation points, %s, torch %s" % (
        args.layers, args.width, args.n_u, args.n_f, device, torch.__version__), flush=True)

    model.train()

    times = model.times
    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=pinn_lbfgs iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              model.iter, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - model.start, device.type), flush=True)


if __name__ == "__main__":
    main()
