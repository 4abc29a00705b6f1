#!/usr/bin/env python3
"""Proximal policy optimization written the way CleanRL's single-file PPO
writes it: a rollout of --num-steps environment steps in --num-envs
environments (the policy's forward passes under torch.no_grad(), the
environments stepped on the CPU), generalized advantage estimation, then
--update-epochs passes over the rollout in --num-minibatches minibatches,
each an Adam update of the actor and the critic (one optimizer) with a
clipped objective and clip_grad_norm_.  No gym: the environment is
CartPole's dynamics in numpy, vectorized, resetting each done environment.

--vec-env subproc: each environment in its own process, as Stable-Baselines3's
SubprocVecEnv (and gymnasium's AsyncVectorEnv) run them: the forkserver
start method, a Pipe per worker, step_async sending every action and
step_wait receiving every result.  --frame-skip K repeats each action K
physics steps, as Atari's wrappers do.

One iteration is one rollout and its updates: --update-epochs x
--num-minibatches optimizer steps, the rollout before the first of them.
"""
import argparse
import multiprocessing as mp
import time

import numpy as np
import torch
import torch.nn as nn


class VectorCartPole:
    """CartPole-v1's dynamics for n environments at once."""

    def __init__(self, n, rng):
        self.n, self.rng = n, rng
        self.state = rng.uniform(-0.05, 0.05, (n, 4))
        self.t = np.zeros(n)

    def step(self, action, frame_skip=1):
        reward = np.zeros(self.n)
        for _ in range(frame_skip):
            obs, r, done = self._physics_step(action)
            reward += r
        return obs, reward, done

    def _physics_step(self, action):
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(action == 1, 10.0, -10.0)
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc,
                               theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc], axis=1)
        self.t += 1
        done = (np.abs(self.state[:, 0]) > 2.4) | (np.abs(self.state[:, 2]) > 0.2095) | (self.t >= 500)
        self.state[done] = self.rng.uniform(-0.05, 0.05, (int(done.sum()), 4))
        self.t[done] = 0
        return self.state.copy(), np.ones(self.n), done


def _env_worker(remote, parent_remote, seed, frame_skip):
    parent_remote.close()
    env = VectorCartPole(1, np.random.default_rng(seed))
    while True:
        cmd, data = remote.recv()
        if cmd == "step":
            o, r, d = env.step(np.array([data]), frame_skip)
            remote.send((o[0], r[0], d[0]))
        elif cmd == "reset":
            remote.send(env.state[0].copy())
        elif cmd == "close":
            remote.close()
            break


class SubprocVecEnv:
    """Stable-Baselines3's SubprocVecEnv: one process per environment, a Pipe to each."""

    def __init__(self, n, seed, frame_skip):
        ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
        self.remotes, work_remotes = zip(*[ctx.Pipe() for _ in range(n)])
        self.processes = []
        for i, (work_remote, remote) in enumerate(zip(work_remotes, self.remotes)):
            proc = ctx.Process(target=_env_worker, args=(work_remote, remote, seed + i, frame_skip), daemon=True)
            proc.start()
            self.processes.append(proc)
            work_remote.close()
        for remote in self.remotes:
            remote.send(("reset", None))
        self.state = np.stack([remote.recv() for remote in self.remotes])

    def step_async(self, actions):
        for remote, action in zip(self.remotes, actions):
            remote.send(("step", action))

    def step_wait(self):
        results = [remote.recv() for remote in self.remotes]
        obs, rews, dones = zip(*results)
        return np.stack(obs), np.stack(rews), np.stack(dones)

    def step(self, actions):
        self.step_async(actions)
        return self.step_wait()

    def close(self):
        for remote in self.remotes:
            remote.send(("close", None))
        for proc in self.processes:
            proc.join()


class InProcessVecEnv:
    def __init__(self, n, seed, frame_skip):
        self.env, self.frame_skip = VectorCartPole(n, np.random.default_rng(seed)), frame_skip
        self.state = self.env.state

    def step(self, actions):
        return self.env.step(actions, self.frame_skip)

    def close(self):
        pass


def layer(i, o, std=np.sqrt(2)):
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


class Agent(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.critic = nn.Sequential(layer(4, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, 1, 1.0))
        self.actor = nn.Sequential(layer(4, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, 2, 0.01))

    def value(self, x):
        return self.critic(x)

    def act(self, x, action=None):
        dist = torch.distributions.Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def parse_args():
    p = argparse.ArgumentParser(description="CleanRL-style PPO on a numpy CartPole")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--vec-env", choices=["inprocess", "subproc"], default="inprocess")
    p.add_argument("--frame-skip", type=int, default=1, help="physics steps per action")
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=2.5e-4)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--warmup-iters", type=int, default=2, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 50
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    vec_env = SubprocVecEnv if args.vec_env == "subproc" else InProcessVecEnv
    envs = vec_env(args.num_envs, args.seed, args.frame_skip)
    agent = Agent(args.hidden).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    T, N = args.num_steps, args.num_envs
    obs = torch.zeros((T, N, 4), device=device)
    actions = torch.zeros((T, N), device=device)
    logprobs = torch.zeros((T, N), device=device)
    rewards = torch.zeros((T, N), device=device)
    dones = torch.zeros((T, N), device=device)
    values = torch.zeros((T, N), device=device)
    next_obs = torch.tensor(envs.state, dtype=torch.float32, device=device)
    next_done = torch.zeros(N, device=device)
    batch = T * N
    minibatch = batch // args.num_minibatches
    print("PPO %d envs (%s, frame skip %d) x %d steps, %d epochs x %d minibatches, %s, torch %s" % (
        N, args.vec_env, args.frame_skip, T, args.update_epochs, args.num_minibatches, device, torch.__version__),
        flush=True)

    times = []
    it = 0
    start = time.perf_counter()
    end = start
    while True:
        for step in range(T):
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.act(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            o, r, d = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(r, dtype=torch.float32, device=device)
            next_obs = torch.tensor(o, dtype=torch.float32, device=device)
            next_done = torch.tensor(d, dtype=torch.float32, device=device)
        with torch.no_grad():
            next_value = agent.value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            last = 0
            for t in reversed(range(T)):
                nonterminal = 1.0 - (next_done if t == T - 1 else dones[t + 1])
                nextvalues = next_value if t == T - 1 else values[t + 1]
                delta = rewards[t] + 0.99 * nextvalues * nonterminal - values[t]
                advantages[t] = last = delta + 0.99 * 0.95 * nonterminal * last
            returns = advantages + values
        b_obs, b_logprobs, b_actions = obs.reshape(-1, 4), logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        for epoch in range(args.update_epochs):
            perm = np.random.permutation(batch)
            for s in range(0, batch, minibatch):
                idx = torch.as_tensor(perm[s:s + minibatch], device=device)
                _, newlogprob, entropy, newvalue = agent.act(b_obs[idx], b_actions.long()[idx])
                ratio = (newlogprob - b_logprobs[idx]).exp()
                adv = b_advantages[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 0.8, 1.2)).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[idx]) ** 2).mean()
                loss = pg_loss - 0.01 * entropy.mean() + 0.5 * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()

        it += 1
        if it % args.log_every == 0:
            loss_value = loss.item()
        now = time.perf_counter()
        times.append(now - end)
        end = now
        if it % args.log_every == 0:
            recent = times[-args.log_every:]
            print("iteration %d loss %.4f %.2f ms/iter" % (it, loss_value, 1000 * sum(recent) / len(recent)),
                  flush=True)
        if (args.iters is not None and it >= args.iters) or (args.seconds is not None and now - start >= args.seconds):
            break

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    envs.close()
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=ppo_rollout iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f elapsed_s=%.2f "
          "device=%s" % (it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
                         time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
