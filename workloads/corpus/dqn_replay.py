#!/usr/bin/env python3
"""DQN with a replay buffer, as CleanRL's single-file dqn.py writes it.

Vectorized CartPole-like environments stepped in numpy on the CPU; every
environment step the Q-network picks actions (epsilon-greedy, a forward
pass under torch.no_grad()), the transitions go into a replay buffer held in
numpy arrays; after --learning-starts steps of play, every
--train-frequency environment steps one minibatch is sampled, the TD target
computed from the target network under torch.no_grad(), and one Adam step
taken; the target network is copied every --target-network-frequency
steps.  So the optimizer steps come once in several environment steps, with
the environment's own work (numpy, the policy's forward passes, the buffer)
between them.

An iteration is one optimizer update: the --train-frequency environment
steps before it and the update itself.  The --learning-starts steps of play
before the first update are printed on their own line and are not an
iteration.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description="DQN with a replay buffer (CleanRL style)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--buffer-size", type=int, default=50000)
    p.add_argument("--learning-starts", type=int, default=2000, help="environment steps of play before training")
    p.add_argument("--train-frequency", type=int, default=10, help="environment steps per optimizer update")
    p.add_argument("--target-network-frequency", type=int, default=500, help="in environment steps")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lr", type=float, default=2.5e-4)
    p.add_argument("--iters", type=int, default=None, help="optimizer updates")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--warmup-iters", type=int, default=5, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 1000
    return args


class CartPoles:
    """CartPole's dynamics (gym's CartPoleEnv) for N environments at once."""

    def __init__(self, n, rng):
        self.n, self.rng = n, rng
        self.state = rng.uniform(-0.05, 0.05, size=(n, 4))
        self.steps = np.zeros(n, dtype=np.int64)

    def step(self, actions):
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(actions == 1, 10.0, -10.0)
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sintheta) / 1.1
        thetaacc = (9.8 * sintheta - costheta * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costheta ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * costheta / 1.1
        self.state = np.stack([x + 0.02 * x_dot, x_dot + 0.02 * xacc,
                               theta + 0.02 * theta_dot, theta_dot + 0.02 * thetaacc], axis=1)
        self.steps += 1
        done = (np.abs(self.state[:, 0]) > 2.4) | (np.abs(self.state[:, 2]) > 0.2095) | (self.steps >= 500)
        reward = np.ones(self.n, dtype=np.float32)
        next_obs = self.state.astype(np.float32)
        if done.any():
            self.state[done] = self.rng.uniform(-0.05, 0.05, size=(int(done.sum()), 4))
            self.steps[done] = 0
        return next_obs, reward, done, self.state.astype(np.float32)


class QNetwork(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 2))

    def forward(self, x):
        return self.network(x)


class ReplayBuffer:
    def __init__(self, size, n_envs, rng):
        self.obs = np.zeros((size, 4), dtype=np.float32)
        self.next_obs = np.zeros((size, 4), dtype=np.float32)
        self.actions = np.zeros(size, dtype=np.int64)
        self.rewards = np.zeros(size, dtype=np.float32)
        self.dones = np.zeros(size, dtype=np.float32)
        self.size, self.pos, self.full, self.rng = size, 0, False, rng

    def add(self, obs, next_obs, actions, rewards, dones):
        for i in range(len(actions)):
            self.obs[self.pos], self.next_obs[self.pos] = obs[i], next_obs[i]
            self.actions[self.pos], self.rewards[self.pos], self.dones[self.pos] = actions[i], rewards[i], dones[i]
            self.pos = (self.pos + 1) % self.size
            self.full = self.full or self.pos == 0

    def sample(self, batch_size, device):
        idx = self.rng.integers(0, self.size if self.full else self.pos, size=batch_size)
        as_tensor = lambda a: torch.as_tensor(a[idx]).to(device)
        return (as_tensor(self.obs), as_tensor(self.actions), as_tensor(self.next_obs), as_tensor(self.rewards),
                as_tensor(self.dones))


def linear_schedule(start_e, end_e, duration, t):
    return max(end_e, start_e + (end_e - start_e) * t / duration)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)

    envs = CartPoles(args.num_envs, rng)
    q_network = QNetwork(args.hidden).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.lr)
    target_network = QNetwork(args.hidden).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(args.buffer_size, args.num_envs, rng)
    print("%d envs, buffer %d, batch %d, train every %d steps, %s, torch %s" % (
        args.num_envs, args.buffer_size, args.batch_size, args.train_frequency, device, torch.__version__),
        flush=True)

    obs = envs.state.astype(np.float32)
    times = []
    it = 0
    global_step = 0
    start = time.perf_counter()
    end = None
    done = False
    while not done:
        epsilon = linear_schedule(1.0, 0.05, 10 * args.learning_starts, global_step)
        if rng.random() < epsilon:
            actions = rng.integers(0, 2, size=args.num_envs)
        else:
            with torch.no_grad():
                q_values = q_network(torch.as_tensor(obs).to(device))
            actions = torch.argmax(q_values, dim=1).cpu().numpy()
        next_obs, rewards, dones, reset_obs = envs.step(actions)
        rb.add(obs, next_obs, actions, rewards, dones)
        obs = reset_obs
        global_step += 1

        if global_step == args.learning_starts:
            now = time.perf_counter()
            print("played %d steps before training in %.1f ms" % (global_step, 1000 * (now - start)), flush=True)
            end = now
        if global_step > args.learning_starts:
            if global_step % args.train_frequency == 0:
                b_obs, b_actions, b_next_obs, b_rewards, b_dones = rb.sample(args.batch_size, device)
                with torch.no_grad():
                    target_max, _ = target_network(b_next_obs).max(dim=1)
                    td_target = b_rewards + args.gamma * target_max * (1 - b_dones)
                old_val = q_network(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze()
                loss = F.mse_loss(td_target, old_val)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

                it += 1
                now = time.perf_counter()
                times.append(now - end)
                end = now
                if it % args.log_every == 0:
                    recent = times[-args.log_every:]
                    print("global_step %d update %d td_loss %.4f q %.3f %.3f ms/iter" % (
                        global_step, it, loss.item(), old_val.mean().item(), 1000 * sum(recent) / len(recent)),
                        flush=True)
                if (args.iters is not None and it >= args.iters) or \
                        (args.seconds is not None and now - start >= args.seconds):
                    done = True
            if global_step % args.target_network_frequency == 0:
                target_network.load_state_dict(q_network.state_dict())

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=dqn_replay iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
