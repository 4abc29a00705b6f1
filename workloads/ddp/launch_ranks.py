#!/usr/bin/env python3
"""Starts N ranks of a torch.distributed job on this host the way torchrun
does: each rank is its own process with RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT in its
environment.  For Debian's python3-torch, whose torchrun does not run on
Python 3.11.  Exits with the first non-zero rank status (0 when all pass).

    python3 launch_ranks.py --nproc 2 [--port 0] -- train_ddp.py --steps 20
"""
import argparse
import os
import signal
import socket
import subprocess
import sys


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("script", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("no script to run")
    port = args.port or free_port()
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ)
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc),
                   LOCAL_WORLD_SIZE=str(args.nproc), GROUP_RANK="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable] + script, env=env))

    def forward(signum, _frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    for p in procs:
        code = p.wait()
        if code != 0 and status == 0:
            status = code if code > 0 else 128 - code
    sys.exit(status)


if __name__ == "__main__":
    main()
