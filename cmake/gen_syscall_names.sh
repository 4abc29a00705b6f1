#!/bin/sh
# Turns the kernel's uapi unistd header into C++ initializer rows
# {nr, "name"}, for agent/common/syscall_names.cc.
# usage: gen_syscall_names.sh <unistd_64.h> <out.inc>
set -e
sed -n 's/^#define __NR_\([a-z0-9_]*\)[[:space:]]\{1,\}\([0-9]\{1,\}\)$/{\2, "\1"},/p' "$1" > "$2.tmp"
test -s "$2.tmp" || { echo "no syscalls found in $1" >&2; exit 1; }
mv "$2.tmp" "$2"
