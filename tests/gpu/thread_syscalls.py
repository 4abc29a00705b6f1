#!/usr/bin/env python3
"""The syscalls each rank's training thread made, from `gpuos-trace dump`:
one line per rank process (the main thread of each process with RANK in
its environment), its top syscalls by calls and time.  For comparing ranks
of one job when one of them is named the straggler.
  thread_syscalls.py DUMP.jsonl [--top N]
Standard library only (the bare GPU machine).
"""
import argparse
import collections
import json

from check_known_work import num

SYSCALL_NAMES = {0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 11: "munmap", 12: "brk", 16: "ioctl",
                 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 202: "futex",
                 232: "epoll_wait", 257: "openat", 262: "newfstatat", 281: "epoll_pwait", 288: "accept4",
                 230: "clock_nanosleep", 24: "sched_yield", 39: "getpid", 186: "gettid", 5: "fstat",
                 10: "mprotect", 13: "rt_sigaction", 14: "rt_sigprocmask", 228: "clock_gettime"}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dump")
    p.add_argument("--top", type=int, default=8)
    args = p.parse_args()
    ranks = {}
    last = collections.defaultdict(dict)  # (pid, tid) -> nr -> (calls, total_ns): cumulative, the last counts
    for line in open(args.dump):
        record = json.loads(line)
        event = record.get("event", record)
        pid, tid = num(event, "pid"), num(event, "tid")
        if "rank_info" in event:
            ranks[pid] = event["rank_info"].get("rank", 0)
        stats = event.get("syscall_stats")
        if stats is not None:
            nr = int(stats.get("nr", 0))
            calls, total = num(stats, "calls"), num(stats, "total_ns")
            old = last[(pid, tid)].get(nr, (0, 0))
            last[(pid, tid)][nr] = (max(old[0], calls), max(old[1], total))
    for pid, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        per = last.get((pid, pid), {})
        top = sorted(per.items(), key=lambda kv: -kv[1][0])[:args.top]
        print("rank %s pid %d training thread: %d calls; top: %s" % (
            rank, pid, sum(c for c, _ in per.values()),
            ", ".join("%s %d (%.1f ms)" % (SYSCALL_NAMES.get(nr, "nr%d" % nr), c, t / 1e6) for nr, (c, t) in top)))


if __name__ == "__main__":
    main()
