// A job to attach to, with behaviour known to the millisecond:
//  - the main thread does one known operation per millisecond: an mmap of
//    kOpBytes (a size nothing else here maps), a touch, and an munmap,
//    logging each call's CLOCK_MONOTONIC start and end;
//  - a second thread counts getppid() calls per 100 ms window: the job's
//    "speed", which tracing slows down and detaching must restore;
//  - SIGUSR1 forks --workers worker processes, each doing --worker-ops
//    operations of the same kind (one per ms), logging theirs, then exiting.
// SIGTERM (or --seconds) ends it; it then writes, to --log:
//   op <pid> mmap|munmap <start_ns> <end_ns>
//   rate <window_start_ns> <getppid calls>
//   worker <pid>
// and exits 0.  Usage: attach_target --log FILE [--workers N]
// [--worker-ops N] [--seconds S]
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kOpBytes = 7 * 4096;  // 28 KiB: unique in this program
constexpr uint64_t kRateWindowNs = 100'000'000;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_fork_requested{false};

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Op {
  const char* call;
  uint64_t start;
  uint64_t end;
};

// One known operation; the two calls' times go to `ops`.
void DoOp(std::vector<Op>* ops) {
  uint64_t t0 = NowNs();
  void* p = mmap(nullptr, kOpBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint64_t t1 = NowNs();
  if (p == MAP_FAILED) {
    perror("mmap");
    _exit(3);
  }
  static_cast<volatile char*>(p)[0] = 1;
  uint64_t t2 = NowNs();
  munmap(p, kOpBytes);
  uint64_t t3 = NowNs();
  ops->push_back({"mmap", t0, t1});
  ops->push_back({"munmap", t2, t3});
}

// Sleeps until the next whole millisecond after `*next`.
void SleepUntil(uint64_t* next) {
  *next += 1'000'000;
  timespec ts{static_cast<time_t>(*next / 1'000'000'000ull), static_cast<long>(*next % 1'000'000'000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void WriteOps(FILE* out, pid_t pid, const std::vector<Op>& ops) {
  for (const Op& op : ops) {
    fprintf(out, "op %d %s %llu %llu\n", pid, op.call, static_cast<unsigned long long>(op.start),
            static_cast<unsigned long long>(op.end));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string log_path;
  int workers = 2, worker_ops = 50;
  double seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--log") log_path = argv[i + 1];
    else if (flag == "--workers") workers = atoi(argv[i + 1]);
    else if (flag == "--worker-ops") worker_ops = atoi(argv[i + 1]);
    else if (flag == "--seconds") seconds = atof(argv[i + 1]);
  }
  if (log_path.empty()) {
    fprintf(stderr, "usage: attach_target --log FILE [--workers N] [--worker-ops N] [--seconds S]\n");
    return 2;
  }
  signal(SIGTERM, [](int) { g_stop = true; });
  signal(SIGUSR1, [](int) { g_fork_requested = true; });

  std::vector<std::pair<uint64_t, uint64_t>> rates;
  rates.reserve(100000);
  std::thread counter([&rates] {
    uint64_t window = NowNs(), calls = 0;
    while (!g_stop) {
      getppid();
      ++calls;
      uint64_t now = NowNs();
      if (now - window >= kRateWindowNs) {
        rates.emplace_back(window, calls);
        window = now;
        calls = 0;
      }
    }
  });

  std::vector<Op> ops;
  ops.reserve(2 * 1000 * 600);
  std::vector<pid_t> worker_pids;
  const uint64_t end = NowNs() + static_cast<uint64_t>(seconds * 1e9);
  uint64_t next = NowNs();
  while (!g_stop && NowNs() < end) {
    if (g_fork_requested.exchange(false)) {
      for (int w = 0; w < workers; ++w) {
        pid_t pid = fork();
        if (pid == 0) {
          std::vector<Op> mine;
          uint64_t wnext = NowNs();
          for (int k = 0; k < worker_ops; ++k) {
            DoOp(&mine);
            SleepUntil(&wnext);
          }
          FILE* out = fopen((log_path + "." + std::to_string(getpid())).c_str(), "w");
          if (out) {
            WriteOps(out, getpid(), mine);
            fclose(out);
          }
          _exit(0);
        }
        if (pid > 0) worker_pids.push_back(pid);
      }
    }
    DoOp(&ops);
    SleepUntil(&next);
  }
  g_stop = true;
  counter.join();
  for (pid_t pid : worker_pids) waitpid(pid, nullptr, 0);

  FILE* out = fopen(log_path.c_str(), "w");
  if (!out) return 4;
  WriteOps(out, getpid(), ops);
  for (const auto& [start, calls] : rates) {
    fprintf(out, "rate %llu %llu\n", static_cast<unsigned long long>(start),
            static_cast<unsigned long long>(calls));
  }
  for (pid_t pid : worker_pids) fprintf(out, "worker %d\n", pid);
  fclose(out);
  return 0;
}
