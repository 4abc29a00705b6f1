# The timed loops of bench/overhead_workload that the OS-side overhead
# scripts run (run_overhead.sh, attach_overhead.sh), their sizes, and
# issue #2's targets for the ns each traced event may add.  Sourced.
declare -A MODE_ARGS=(
  [getppid]="--ops 300000 --warmup 30000"
  [futex-wake]="--ops 300000 --warmup 30000"
  [mmap-touch-munmap]="--ops 15000 --warmup 1500"
  [page-fault]="--ops 65536 --warmup 16384"
  [futex-pingpong]="--ops 100000 --warmup 10000"
)
declare -A MODE_TARGET=([getppid]=150 [futex-wake]=150 [mmap-touch-munmap]=700 [page-fault]=200)
declare -A MODE_UNIT=([getppid]="syscall" [futex-wake]="syscall" [mmap-touch-munmap]="mmap+touch+munmap" [page-fault]="page fault"
                      [futex-pingpong]="hand-off round trip (2 wakeups, 2 sleeps, 4 futex calls)")
# futex-pingpong is not in the default list (no target of issue #2): name it.
MODES=(futex-wake getppid mmap-touch-munmap page-fault)
