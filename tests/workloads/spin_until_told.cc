// A thread that runs without a syscall while a test changes what the
// tracer's kernel side knows about it, then makes one syscall when told:
// recording_unseen_switch_in_test uses it to stand in for a switch-in the
// kernel did not trace.  Talks through a shared file of three 64-bit words:
// [0] its tid, [1] the round it spins in, [2] the round the test lets go.
// It spins as a real-time (SCHED_FIFO) thread where it may, so that a
// loaded machine does not switch it out while the test writes (other
// threads' work then waits on the other CPUs).
// Each round: note the round, spin until let go (the test may move it to
// another CPU meanwhile), read CLOCK_MONOTONIC
// (vDSO: no syscall), getppid(), read the clock again, sleep 2 ms.  Then it
// notes round N+1 and sleeps 300 ms (the test looks at it off the CPU), and
// prints "round R before_ns B after_ns A" per round to --report.
// While it spins it notes each stretch of more than 1 us between two clock
// readings as "gap R START END" (at most 1024 a round; "gaps_lost R N" for
// those beyond): time it did not run (the hypervisor took the vCPU, an
// interrupt, a switch), which the kernel may not charge as its run time.
// Usage: spin_until_told --shared FILE --rounds N --report FILE
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

constexpr uint64_t kGapNs = 1'000;
constexpr int kMaxGapsPerRound = 1024;

struct Gap {
  uint64_t start_ns;
  uint64_t end_ns;
};

}  // namespace

int main(int argc, char** argv) {
  const char* shared = nullptr;
  const char* report = nullptr;
  int rounds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--shared") == 0) {
      shared = argv[i + 1];
    } else if (strcmp(argv[i], "--rounds") == 0) {
      rounds = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--report") == 0) {
      report = argv[i + 1];
    }
  }
  if (shared == nullptr || report == nullptr || rounds <= 0) {
    fprintf(stderr, "usage: spin_until_told --shared FILE --rounds N --report FILE\n");
    return 2;
  }
  const int fd = open(shared, O_RDWR);
  if (fd < 0) return 3;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (page == MAP_FAILED) return 3;
  auto* words = static_cast<std::atomic<uint64_t>*>(page);
  words[0] = static_cast<uint64_t>(syscall(SYS_gettid));
  std::vector<uint64_t> before(rounds), after(rounds);
  // Kept before the rounds begin: an allocation while spinning could make
  // a syscall (mmap), which the test must not see.
  std::vector<Gap> gaps(static_cast<size_t>(rounds) * kMaxGapsPerRound);
  std::vector<int> gap_count(rounds, 0), gaps_lost(rounds, 0);
  sched_param realtime{};
  realtime.sched_priority = 1;
  sched_setscheduler(0, SCHED_FIFO, &realtime);  // without the right to, it spins as it is
  for (int r = 1; r <= rounds; ++r) {
    words[1] = static_cast<uint64_t>(r);
    Gap* round_gaps = &gaps[static_cast<size_t>(r - 1) * kMaxGapsPerRound];
    uint64_t last = MonotonicNs();
    while (words[2].load() != static_cast<uint64_t>(r)) {
      const uint64_t now = MonotonicNs();
      if (now - last > kGapNs) {
        if (gap_count[r - 1] < kMaxGapsPerRound) {
          round_gaps[gap_count[r - 1]++] = Gap{last, now};
        } else {
          ++gaps_lost[r - 1];
        }
      }
      last = now;
    }
    before[r - 1] = MonotonicNs();
    syscall(SYS_getppid);
    after[r - 1] = MonotonicNs();
    usleep(2000);
  }
  sched_param normal{};
  sched_setscheduler(0, SCHED_OTHER, &normal);
  words[1] = static_cast<uint64_t>(rounds + 1);
  usleep(300'000);
  FILE* out = fopen(report, "w");
  if (out == nullptr) return 4;
  for (int r = 1; r <= rounds; ++r) {
    fprintf(out, "round %d before_ns %llu after_ns %llu\n", r, static_cast<unsigned long long>(before[r - 1]),
            static_cast<unsigned long long>(after[r - 1]));
    for (int g = 0; g < gap_count[r - 1]; ++g) {
      const Gap& gap = gaps[static_cast<size_t>(r - 1) * kMaxGapsPerRound + g];
      fprintf(out, "gap %d %llu %llu\n", r, static_cast<unsigned long long>(gap.start_ns),
              static_cast<unsigned long long>(gap.end_ns));
    }
    if (gaps_lost[r - 1] > 0) fprintf(out, "gaps_lost %d %d\n", r, gaps_lost[r - 1]);
  }
  fclose(out);
  return 0;
}
