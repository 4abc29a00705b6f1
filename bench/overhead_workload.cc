// overhead_workload: the loops the recording-overhead benchmarks time.
// Each mode repeats one kind of traced event and prints one line of
// key=value figures (ns per operation over CLOCK_MONOTONIC, after a warmup),
// so bench/run_overhead.sh can run it traced and untraced and compare.
//
//   overhead_workload MODE [--ops N] [--warmup N] [--threads T]
//                          [--rate OPS_PER_S] [--seconds S] [--total N]
//                          [--phases P]
//
// --phases P (timed modes): runs the timed loop P times in this one
// process, printing "ready phase=K" before each and waiting for a line on
// stdin to start it, so a script can attach a tracer between phases and
// compare traced and untraced loops of the same process
// (bench/attach_overhead.sh).
//
// Timed modes (one thread, --ops operations):
//   getppid            syscall(SYS_getppid): the cheapest syscall
//   futex-wake         FUTEX_WAKE on a word nobody waits on
//   mmap-touch-munmap  mmap one anonymous page, write to it, munmap it
//   futex-pingpong     hand a turn to a second thread and wait for it back
//                      (futex wait and wake on each side): two wakeups and
//                      two sleeps a round trip, what a training loop's
//                      hand-off to its autograd or data thread costs; run
//                      the process on one CPU (taskset) for a context
//                      switch at each hand-off
//   page-fault         write to fresh 4 KiB pages of a large private
//                      anonymous region (THP off), MADV_DONTNEED, repeat;
//                      only the touching is timed
// Rate modes (--threads threads for --seconds or until --total operations,
// paced to --rate ops/s in total, or as fast as possible with --rate 0):
//   futex-wait         FUTEX_WAIT whose expected value never matches: it
//                      returns EAGAIN at once, and gpuos-trace sends one
//                      ring-buffer record per call
//   mmap-munmap        mmap + munmap of one page: two records per pair
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kPage = 4096;

struct Options {
  std::string mode;
  uint64_t ops = 1'000'000;
  uint64_t warmup = 100'000;
  int threads = 1;
  double rate = 0;  // ops/s over all threads; 0 = unpaced
  double seconds = 3;
  uint64_t total = 0;  // rate modes: stop after this many ops; 0 = no limit
  int phases = 0;      // timed modes: 0 = one loop, no handshake
};

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

// This thread's time on a CPU and waiting on a run queue, in ns.  On a
// shared machine the wall time of a loop includes other people's work; its
// own CPU time does not.  The CPU time comes from CLOCK_THREAD_CPUTIME_ID,
// which brings the running thread's runtime up to date first;
// /proc/thread-self/schedstat's first field does not, and moves only at
// scheduler ticks and switches (4 ms apart at HZ=250: over a 15,000-op mmap
// loop that was +-267 ns per op, and the on-CPU medians sat on a 13.3 ns
// grid for 300,000-op loops).  The run-queue wait only grows while the
// thread is off the CPU, so schedstat's second field is exact at any read.
struct SchedTimes {
  uint64_t on_cpu_ns = 0;
  uint64_t runqueue_ns = 0;
};

SchedTimes ReadSchedTimes() {
  SchedTimes t;
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  t.on_cpu_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
  FILE* f = fopen("/proc/thread-self/schedstat", "r");
  if (f) {
    unsigned long long cpu = 0, wait = 0;
    if (fscanf(f, "%llu %llu", &cpu, &wait) == 2) t.runqueue_ns = wait;
    fclose(f);
  }
  return t;
}

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// Involuntary context switches of this thread: how often something else
// took its CPU (a tracer woken on the same CPU shows up here).
long Preemptions() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nivcsw;
}

// The word futex calls operate on; nothing ever waits on it.
alignas(64) uint32_t g_futex_word = 0;

void FutexWake() {
  syscall(SYS_futex, &g_futex_word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void FutexWaitMismatch() {
  // The word is 0, the expected value 1: the kernel returns EAGAIN without
  // sleeping, after the syscall tracepoints have run.
  syscall(SYS_futex, &g_futex_word, FUTEX_WAIT_PRIVATE, 1, nullptr, nullptr, 0);
}

// futex-pingpong: whose turn it is (0 the timed thread's, 1 the partner's).
alignas(64) std::atomic<uint32_t> g_turn{0};

void FutexWaitWhile(std::atomic<uint32_t>* word, uint32_t value) {
  while (word->load() == value) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, value, nullptr, nullptr, 0);
  }
}

void HandTurn(std::atomic<uint32_t>* word, uint32_t to) {
  word->store(to);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void PingPong() {
  static std::thread* partner = new std::thread([] {
    for (;;) {
      FutexWaitWhile(&g_turn, 0);
      HandTurn(&g_turn, 0);
    }
  });
  (void)partner;
  HandTurn(&g_turn, 1);
  FutexWaitWhile(&g_turn, 1);
}

bool MmapMunmap(bool touch) {
  void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  if (touch) *static_cast<volatile char*>(p) = 1;
  munmap(p, kPage);
  return true;
}

// One operation of a timed or rate mode; false on a failure that makes the
// figures meaningless.
bool RunOne(const std::string& mode) {
  if (mode == "getppid") {
    syscall(SYS_getppid);
  } else if (mode == "futex-wake") {
    FutexWake();
  } else if (mode == "futex-wait") {
    FutexWaitMismatch();
  } else if (mode == "futex-pingpong") {
    PingPong();
  } else if (mode == "mmap-touch-munmap") {
    return MmapMunmap(true);
  } else if (mode == "mmap-munmap") {
    return MmapMunmap(false);
  }
  return true;
}

// ns_per_op is wall time; cpu_ns_per_op the loop thread's own CPU time;
// wait_ns_per_op its time runnable but not running (other load).
void PrintTimed(const std::string& mode, uint64_t ops, uint64_t wall_ns, uint64_t cpu_ns,
                uint64_t wait_ns, long faults, long preemptions) {
  printf("mode=%s ops=%llu ns_per_op=%.2f cpu_ns_per_op=%.2f wait_ns_per_op=%.2f "
         "faults_per_op=%.3f preemptions=%ld seconds=%.3f cpu=%d\n",
         mode.c_str(), static_cast<unsigned long long>(ops), static_cast<double>(wall_ns) / ops,
         static_cast<double>(cpu_ns) / ops, static_cast<double>(wait_ns) / ops,
         static_cast<double>(faults) / ops, preemptions, wall_ns / 1e9, sched_getcpu());
}

int RunLoop(const Options& o) {
  for (uint64_t i = 0; i < o.warmup; ++i) {
    if (!RunOne(o.mode)) return 1;
  }
  long faults_before = MinorFaults();
  long preemptions_before = Preemptions();
  SchedTimes sched_before = ReadSchedTimes();
  uint64_t start = NowNs();
  for (uint64_t i = 0; i < o.ops; ++i) {
    if (!RunOne(o.mode)) {
      fprintf(stderr, "overhead_workload: %s failed: %s\n", o.mode.c_str(), strerror(errno));
      return 1;
    }
  }
  uint64_t elapsed = NowNs() - start;
  SchedTimes sched_after = ReadSchedTimes();
  long faults = MinorFaults() - faults_before;
  PrintTimed(o.mode, o.ops, elapsed, sched_after.on_cpu_ns - sched_before.on_cpu_ns,
             sched_after.runqueue_ns - sched_before.runqueue_ns, faults,
             Preemptions() - preemptions_before);
  return 0;
}

// Touches every page of a region, drops the pages with MADV_DONTNEED and
// touches them again until --ops faults were taken; only touching is timed,
// so the per-op figure is one first-touch fault (zeroing a page included).
int RunPageFaults(const Options& o) {
  constexpr size_t kRegionPages = 16384;  // 64 MiB
  const size_t bytes = kRegionPages * kPage;
  char* region = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (region == MAP_FAILED) {
    fprintf(stderr, "overhead_workload: mmap of %zu bytes failed: %s\n", bytes, strerror(errno));
    return 1;
  }
  // With THP one fault would map 2 MiB: not the event being measured.
  if (madvise(region, bytes, MADV_NOHUGEPAGE) != 0) {
    fprintf(stderr, "overhead_workload: MADV_NOHUGEPAGE failed: %s\n", strerror(errno));
    return 1;
  }
  auto touch_pass = [&](uint64_t pages) {
    for (uint64_t i = 0; i < pages; ++i) static_cast<volatile char*>(region)[i * kPage] = 1;
    madvise(region, bytes, MADV_DONTNEED);
  };
  for (uint64_t done = 0; done < o.warmup; done += kRegionPages) touch_pass(kRegionPages);

  uint64_t wall_ns = 0, cpu_ns = 0, wait_ns = 0;
  long faults = 0, preemptions = 0;
  for (uint64_t done = 0; done < o.ops;) {
    uint64_t pages = std::min<uint64_t>(kRegionPages, o.ops - done);
    long faults_before = MinorFaults();
    long preemptions_before = Preemptions();
    SchedTimes sched_before = ReadSchedTimes();
    uint64_t start = NowNs();
    for (uint64_t i = 0; i < pages; ++i) static_cast<volatile char*>(region)[i * kPage] = 1;
    wall_ns += NowNs() - start;
    SchedTimes sched_after = ReadSchedTimes();
    faults += MinorFaults() - faults_before;
    preemptions += Preemptions() - preemptions_before;
    cpu_ns += sched_after.on_cpu_ns - sched_before.on_cpu_ns;
    wait_ns += sched_after.runqueue_ns - sched_before.runqueue_ns;
    madvise(region, bytes, MADV_DONTNEED);
    done += pages;
  }
  munmap(region, bytes);
  PrintTimed("page-fault", o.ops, wall_ns, cpu_ns, wait_ns, faults, preemptions);
  return 0;
}

// Runs --threads threads for --seconds; each is paced to its share of
// --rate by sleeping to an absolute schedule every batch.
int RunRate(const Options& o) {
  constexpr uint64_t kBatch = 256;
  const uint64_t deadline_ns = static_cast<uint64_t>(o.seconds * 1e9);
  const double per_thread_rate = o.rate / o.threads;
  std::atomic<uint64_t> total_ops{0};  // claimed, for --total
  std::atomic<uint64_t> done_ops{0};
  std::atomic<bool> failed{false};
  uint64_t start = NowNs();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&] {
      uint64_t ops = 0;
      for (;;) {
        if (o.total && total_ops.fetch_add(kBatch) >= o.total) break;
        for (uint64_t i = 0; i < kBatch; ++i) {
          if (!RunOne(o.mode)) {
            failed = true;
            break;
          }
        }
        ops += kBatch;
        done_ops += kBatch;
        uint64_t now = NowNs();
        if (failed || now - start >= deadline_ns) break;
        if (per_thread_rate > 0) {
          uint64_t due = start + static_cast<uint64_t>(ops / per_thread_rate * 1e9);
          if (due > now) {
            timespec ts{static_cast<time_t>(due / 1'000'000'000ull),
                        static_cast<long>(due % 1'000'000'000ull)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  uint64_t elapsed = NowNs() - start;
  if (failed) {
    fprintf(stderr, "overhead_workload: %s failed: %s\n", o.mode.c_str(), strerror(errno));
    return 1;
  }
  int records_per_op = o.mode == "mmap-munmap" ? 2 : 1;
  uint64_t ops = done_ops.load();
  printf("mode=%s threads=%d ops=%llu records=%llu seconds=%.3f records_per_s=%.0f\n",
         o.mode.c_str(), o.threads, static_cast<unsigned long long>(ops),
         static_cast<unsigned long long>(ops * records_per_op), elapsed / 1e9,
         ops * records_per_op / (elapsed / 1e9));
  return 0;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  if (argc < 2) return false;
  o->mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    char* end = nullptr;
    double number = strtod(value, &end);
    if (*end != '\0' || number < 0) return false;
    if (flag == "--ops") {
      o->ops = static_cast<uint64_t>(number);
    } else if (flag == "--warmup") {
      o->warmup = static_cast<uint64_t>(number);
    } else if (flag == "--threads") {
      o->threads = static_cast<int>(number);
    } else if (flag == "--rate") {
      o->rate = number;
    } else if (flag == "--seconds") {
      o->seconds = number;
    } else if (flag == "--total") {
      o->total = static_cast<uint64_t>(number);
    } else if (flag == "--phases") {
      o->phases = static_cast<int>(number);
    } else {
      return false;
    }
  }
  return o->ops > 0 && o->threads > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    fprintf(stderr,
            "usage: overhead_workload getppid|futex-wake|mmap-touch-munmap|page-fault "
            "[--ops N] [--warmup N]\n"
            "       overhead_workload futex-wait|mmap-munmap [--threads T] [--rate OPS_PER_S] "
            "[--seconds S] [--total N]\n");
    return 2;
  }
  if (o.mode == "futex-wait" || o.mode == "mmap-munmap") return RunRate(o);
  int (*timed)(const Options&) = nullptr;
  if (o.mode == "page-fault") timed = RunPageFaults;
  if (o.mode == "getppid" || o.mode == "futex-wake" || o.mode == "mmap-touch-munmap" ||
      o.mode == "futex-pingpong") {
    timed = RunLoop;
  }
  if (!timed) {
    fprintf(stderr, "overhead_workload: unknown mode %s\n", o.mode.c_str());
    return 2;
  }
  if (o.phases == 0) return timed(o);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  char line[64];
  for (int phase = 1; phase <= o.phases; ++phase) {
    printf("ready phase=%d\n", phase);
    if (!fgets(line, sizeof(line), stdin)) return 0;  // the script gave up
    if (int rc = timed(o); rc != 0) return rc;
  }
  return 0;
}
