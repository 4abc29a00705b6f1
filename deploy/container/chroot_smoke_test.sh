#!/bin/bash
# Smoke test of the image where containers cannot be started (the
# development VM: crun cannot set rlimits there): mounts the image's file
# system, binds in what the DaemonSet mounts (host /proc as with hostPID,
# /sys with tracefs, debugfs and bpffs, /dev, a /traces directory, a /tmp),
# and runs the image's gpuos-trace with chroot: once launching a command,
# once attaching to a process of the host with --pid.
#   deploy/container/chroot_smoke_test.sh [IMAGE] [TRACES_DIR]
set -euo pipefail
image=${1:-localhost/gpuos-trace:test}
traces=${2:-/tmp/img_traces}
mnt=$(podman image mount "$image")
mkdir -p "$traces"; rm -f "$traces"/*.gpuos
sh -c 'while :; do ls / >/dev/null; sleep 0.05; done' &
host_pid=$!
trap 'kill $host_pid' EXIT
unshare -m bash -c "
set -e
mount --make-rprivate /
mount --rbind /proc $mnt/proc
mount --rbind /sys $mnt/sys
mount --rbind /dev $mnt/dev
mount --bind $traces $mnt/traces
mount -t tmpfs tmpfs $mnt/tmp
chroot $mnt /usr/local/bin/gpuos-trace -q -o /traces/launch.gpuos -- /bin/sh -c 'ls / > /dev/null; sleep 0.1'
echo launch rc=\$?
chroot $mnt /usr/local/bin/gpuos-trace -q --pid $host_pid --duration 1s -o /traces/attach.gpuos
echo attach rc=\$?
"
ls -l "$traces"
