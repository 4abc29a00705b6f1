// A process tree with exactly known OS behaviour, for the runtime tests to
// check a recording against.  Every thread does a fixed amount of work with
// raw system calls (so libc cannot add, merge or cache calls) and, just
// before it ends, appends one line to the report file: what it did and the
// kernel's own accounting of it at that moment.
//
//   ground_truth [options] --report FILE
//     --threads N            extra threads in the main process (default 2)
//     --workers M            forked worker processes (default 2); worker 0
//                            also forks a grandchild
//     --worker-threads W     extra threads in each worker (default 1)
//     --mmaps K --mmap-bytes B    K mmap+munmap pairs of B bytes per thread
//     --futex-waits F --futex-timeout-us T   F futex waits that time out
//     --futex-wakes K        K futex wakes of a word nobody waits on
//     --touch-pages P        P fresh pages written (P user page faults)
//     --sleeps S --sleep-us U     S nanosleeps
//     --exec                 the last worker execs this program first
//     --reexec main|thread   the main process execs this program before any
//                            work, from its main thread or from a new thread
//     --leader-exits         no workers; the main thread reports and calls
//                            pthread_exit(), and its threads work only after
//                            it is gone
//
// Report line (one per thread, "key=value" separated by spaces):
//   role (main, thread, worker, grandchild, exec, exec-main) pid ppid tid
//   comm (the name at the end), clean
//   vcsw ivcsw minflt majflt: /proc/self/task/TID/status and stat
//   ru_nvcsw ru_nivcsw ru_minflt ru_majflt: getrusage(RUSAGE_THREAD)
//   read_begin_ns read_end_ns: CLOCK_MONOTONIC around those reads
//   mmaps munmaps mmap_bytes munmap_bytes work_mmaps work_bytes futex_waits
//   futex_timeouts futex_addr futex_wakes futex_woken sleeps sleep_ns touched
//   joins forks
//   pre_exec_tid: for exec-main, the thread that called execve
//   handoff_waker: for thread 0 of a process, the main thread, which woke
//     it from its one blocking read (a pipe) in the rename handshake
// mmaps/munmaps/..._bytes count every mmap and munmap the thread made itself
// (work, the page-touch region, stacks it made for its threads).  clean=0
// marks a thread that also ran code nobody counted: the dynamic loader after
// execve (the main thread of an exec'd image, and of the traced command).
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

struct Options {
  int threads = 2;
  int workers = 2;
  int worker_threads = 1;
  long mmaps = 10;
  long mmap_bytes = 3 * 4096 + 123;
  long futex_waits = 3;
  long futex_timeout_us = 2000;
  long futex_wakes = 0;
  long touch_pages = 32;
  long sleeps = 3;
  long sleep_us = 2000;
  bool exec_worker = false;
  std::string reexec;  // "", "main" or "thread"
  bool leader_exits = false;
  std::string report;
  // Internal: this image was exec'd by a worker ("x") or by --reexec ("e").
  std::string exec_child;
  long pre_exec_tid = 0;
};

Options g_opt;
int g_report_fd = -1;
std::string g_self;  // this program's path, resolved before any fork
constexpr size_t kStackBytes = 512 * 1024;

// What one thread did with its own system calls.
struct Tally {
  long mmaps = 0, munmaps = 0, mmap_bytes = 0, munmap_bytes = 0;
  long work_mmaps = 0;
  long futex_waits = 0, futex_timeouts = 0;
  long futex_wakes = 0, futex_woken = 0;
  uintptr_t futex_addr = 0;
  long sleeps = 0, sleep_ns = 0;
  long touched = 0;
  long joins = 0, forks = 0;
  long handoff_waker = 0;  // the thread that woke this one's handshake read (thread 0 only)
};

[[noreturn]] void Die(const char* what) {
  char line[256];
  int n = snprintf(line, sizeof(line), "ground_truth: %s: %s\n", what, strerror(errno));
  if (write(2, line, n) < 0) {
  }
  _exit(99);
}

pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void SetName(const char* name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

void* RawMmap(Tally& t, size_t bytes) {
  void* p = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) Die("mmap");
  ++t.mmaps;
  t.mmap_bytes += static_cast<long>(bytes);
  return p;
}

void RawMunmap(Tally& t, void* p, size_t bytes) {
  if (syscall(SYS_munmap, p, bytes) != 0) Die("munmap");
  ++t.munmaps;
  t.munmap_bytes += static_cast<long>(bytes);
}

// The fixed work of every thread.
void DoWork(Tally& t) {
  for (long i = 0; i < g_opt.mmaps; ++i) {
    void* p = RawMmap(t, static_cast<size_t>(g_opt.mmap_bytes));
    RawMunmap(t, p, static_cast<size_t>(g_opt.mmap_bytes));
    ++t.work_mmaps;
  }
  if (g_opt.touch_pages > 0) {
    const long page = sysconf(_SC_PAGESIZE);
    const size_t bytes = static_cast<size_t>(g_opt.touch_pages * page);
    char* region = static_cast<char*>(RawMmap(t, bytes));
    // One fault per page: no transparent huge pages of any size.
    if (madvise(region, bytes, MADV_NOHUGEPAGE) != 0) Die("madvise");
    for (long i = 0; i < g_opt.touch_pages; ++i) {
      region[i * page] = 1;
      ++t.touched;
    }
    RawMunmap(t, region, bytes);
  }
  // A private futex word nobody wakes: every wait ends in -ETIMEDOUT.
  uint32_t word = 0;
  t.futex_addr = reinterpret_cast<uintptr_t>(&word);
  for (long i = 0; i < g_opt.futex_waits; ++i) {
    struct timespec timeout = {g_opt.futex_timeout_us / 1000000,
                               (g_opt.futex_timeout_us % 1000000) * 1000};
    long rc = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &timeout, nullptr, 0);
    ++t.futex_waits;
    if (rc == -1 && errno == ETIMEDOUT) ++t.futex_timeouts;
  }
  // Wakes of the same word: nobody waits, so each wakes no one.
  for (long i = 0; i < g_opt.futex_wakes; ++i) {
    long rc = syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    ++t.futex_wakes;
    if (rc > 0) t.futex_woken += rc;
  }
  for (long i = 0; i < g_opt.sleeps; ++i) {
    struct timespec ts = {g_opt.sleep_us / 1000000, (g_opt.sleep_us % 1000000) * 1000};
    syscall(SYS_nanosleep, &ts, nullptr);
    ++t.sleeps;
    t.sleep_ns += g_opt.sleep_us * 1000;
  }
}

// Reads a small /proc file into `buf`; raw calls, no allocation.
void ReadSmallFile(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die(path);
  ssize_t total = 0, n;
  while (total < static_cast<ssize_t>(size) - 1 &&
         (n = read(fd, buf + total, size - 1 - static_cast<size_t>(total))) > 0) {
    total += n;
  }
  buf[total] = 0;
  close(fd);
}

long StatusField(const char* status, const char* name) {
  const char* p = strstr(status, name);
  return p ? strtol(p + strlen(name), nullptr, 10) : -1;
}

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock of bpf_ktime_get_ns()
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Appends this thread's line: what it did and what the kernel counted.  The
// kernel's counters are read between read_begin_ns and read_end_ns, so a
// checker can tell which recorded events came before the reading.
void Report(const char* role, pid_t ppid, bool clean, const Tally& t) {
  const pid_t pid = getpid();
  const pid_t tid = Tid();
  char path[64], status[4096], stat[1024], comm[32];
  // Written here, in user mode, so that the reads below cannot take a page
  // fault in kernel mode (copy_to_user into a fresh stack page): the
  // kernel would count that one and the tracer would not.
  memset(status, 0, sizeof(status));
  memset(stat, 0, sizeof(stat));
  memset(comm, 0, sizeof(comm));
  struct rusage ru;
  memset(&ru, 0, sizeof(ru));
  // A rehearsal first, so that the real reading below runs only code and
  // touches only data that are already mapped: a forked child's first call
  // of anything (code pages, the vDSO data) is a page fault.
  MonotonicNs();
  snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
  ReadSmallFile(path, status, sizeof(status));
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  ReadSmallFile(path, stat, sizeof(stat));
  getrusage(RUSAGE_THREAD, &ru);
  // A short sleep switches the thread out, which makes the tracer close its
  // current page-fault window: faults before the reading are then in
  // windows that end before it.
  struct timespec flush = {0, 100000};
  syscall(SYS_nanosleep, &flush, nullptr);

  const uint64_t read_begin_ns = MonotonicNs();
  snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
  ReadSmallFile(path, status, sizeof(status));
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  ReadSmallFile(path, stat, sizeof(stat));
  getrusage(RUSAGE_THREAD, &ru);
  const uint64_t read_end_ns = MonotonicNs();
  prctl(PR_GET_NAME, comm, 0, 0, 0);
  comm[16] = 0;

  // stat: fields after the ")" that ends comm; minflt is field 10, majflt 12.
  long minflt = -1, majflt = -1;
  const char* p = strrchr(stat, ')');
  if (p) {
    int field = 2;
    for (const char* c = p + 1; *c; ++c) {
      if (*c != ' ') continue;
      ++field;
      if (field == 10) minflt = strtol(c + 1, nullptr, 10);
      if (field == 12) majflt = strtol(c + 1, nullptr, 10);
    }
  }
  char line[1024];
  memset(line, 0, sizeof(line));
  int n = snprintf(
      line, sizeof(line),
      "role=%s pid=%d ppid=%d tid=%d comm=%s clean=%d vcsw=%ld ivcsw=%ld minflt=%ld majflt=%ld "
      "ru_nvcsw=%ld ru_nivcsw=%ld ru_minflt=%ld ru_majflt=%ld mmaps=%ld munmaps=%ld "
      "mmap_bytes=%ld munmap_bytes=%ld work_mmaps=%ld work_bytes=%ld futex_waits=%ld "
      "futex_timeouts=%ld futex_addr=%lu futex_wakes=%ld futex_woken=%ld sleeps=%ld sleep_ns=%ld touched=%ld joins=%ld forks=%ld "
      "pre_exec_tid=%ld handoff_waker=%ld read_begin_ns=%llu read_end_ns=%llu\n",
      role, pid, ppid, tid, comm, clean ? 1 : 0,
      StatusField(status, "\nvoluntary_ctxt_switches:"),
      StatusField(status, "\nnonvoluntary_ctxt_switches:"), minflt, majflt, ru.ru_nvcsw,
      ru.ru_nivcsw, ru.ru_minflt, ru.ru_majflt, t.mmaps, t.munmaps, t.mmap_bytes, t.munmap_bytes,
      t.work_mmaps, g_opt.mmap_bytes, t.futex_waits, t.futex_timeouts,
      static_cast<unsigned long>(t.futex_addr), t.futex_wakes, t.futex_woken, t.sleeps, t.sleep_ns, t.touched, t.joins, t.forks,
      role[0] == 'e' ? g_opt.pre_exec_tid : 0L, t.handoff_waker, static_cast<unsigned long long>(read_begin_ns),
      static_cast<unsigned long long>(read_end_ns));
  // One write of a whole line to an O_APPEND file: lines never interleave.
  if (write(g_report_fd, line, static_cast<size_t>(n)) != n) Die("write report");
}

// After fork() every page of the process is copy-on-write in parent and
// child.  The first write to such a page from user mode is a user page
// fault (the tracer sees it); the first write from the kernel (a syscall
// storing a result on the stack, the kernel's rseq update of the thread's
// rseq area) is a kernel-mode fault that only the kernel's counters see.
// So right after each fork, both sides write to what the kernel will write
// to: the next part of the stack and the rseq area.  That leaves one fault
// the tracer cannot see: the child's CLONE_CHILD_SETTID store, made by the
// kernel before the child's first instruction.
__attribute__((noinline)) void OwnStackAndRseqArea() {
  volatile char stack[256 * 1024];
  for (size_t i = 0; i < sizeof(stack); i += 4096) stack[i] = 0;
  if (__rseq_size > 0) {
    // `flags` is written only by user space: storing its value back is safe.
    auto* area = reinterpret_cast<volatile struct rseq*>(
        static_cast<char*>(__builtin_thread_pointer()) + __rseq_offset);
    area->flags = area->flags;
  }
}

pid_t Fork(Tally& t) {
  const pid_t child = fork();
  if (child < 0) Die("fork");
  ++t.forks;
  OwnStackAndRseqArea();
  return child;
}

struct ThreadArgs {
  char role[16];
  // Wider than a comm (15 bytes): the kernel truncates; tags are short.
  char first_name[32];
  char last_name[32];
  pid_t ppid;
  // --leader-exits: work only once the main thread has exited.
  bool wait_for_leader;
  // Cross-thread rename handshake (fds, -1 when unused): the thread says it
  // is done, the main thread renames it through /proc, then lets it report.
  int done_fd;
  int renamed_fd;
  pid_t waker_tid;  // the main thread, which ends the handshake
};

bool LeaderGone() {
  char path[64], stat[1024];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", getpid());
  ReadSmallFile(path, stat, sizeof(stat));
  const char* p = strrchr(stat, ')');
  return p && (p[2] == 'Z' || p[2] == 'X');
}

void* ThreadMain(void* raw) {
  ThreadArgs* a = static_cast<ThreadArgs*>(raw);
  SetName(a->first_name);
  if (a->wait_for_leader) {
    while (!LeaderGone()) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, nullptr);
    }
  }
  Tally t;
  DoWork(t);
  SetName(a->last_name);
  if (a->done_fd >= 0) {
    // Our tid, so that the main thread can see us asleep in the read below
    // before it writes: that read then blocks once, woken by the main thread.
    const pid_t tid = Tid();
    if (write(a->done_fd, &tid, sizeof(tid)) != sizeof(tid)) Die("handshake write");
    char c;
    if (read(a->renamed_fd, &c, 1) != 1) Die("handshake read");
    t.handoff_waker = a->waker_tid;
  }
  Report(a->role, a->ppid, true, t);
  return nullptr;
}

struct Started {
  pthread_t handle;
  void* stack;
};

// Threads run on stacks this thread maps itself (and counts), so that glibc's
// stack cache cannot add or hide an mmap.
Started StartThread(Tally& t, ThreadArgs* args) {
  Started s;
  s.stack = RawMmap(t, kStackBytes);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, s.stack, kStackBytes);
  if (int err = pthread_create(&s.handle, &attr, ThreadMain, args); err != 0) {
    errno = err;
    Die("pthread_create");
  }
  pthread_attr_destroy(&attr);
  return s;
}

void JoinThread(Tally& t, Started& s) {
  pthread_join(s.handle, nullptr);
  ++t.joins;
  RawMunmap(t, s.stack, kStackBytes);
}

void OpenReport() {
  g_report_fd = open(g_opt.report.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (g_report_fd < 0) Die(g_opt.report.c_str());
}

void Name(char (&out)[16], const char* fmt, const char* a, int b = -1) {
  if (b >= 0) {
    snprintf(out, sizeof(out), fmt, a, b);
  } else {
    snprintf(out, sizeof(out), fmt, a);
  }
}

std::vector<std::string> WorkArgs() {
  const Options& o = g_opt;
  return {"--report",     o.report,
          "--mmaps",      std::to_string(o.mmaps),
          "--mmap-bytes", std::to_string(o.mmap_bytes),
          "--futex-waits", std::to_string(o.futex_waits),
          "--futex-timeout-us", std::to_string(o.futex_timeout_us),
          "--futex-wakes", std::to_string(o.futex_wakes),
          "--touch-pages", std::to_string(o.touch_pages),
          "--sleeps",     std::to_string(o.sleeps),
          "--sleep-us",   std::to_string(o.sleep_us),
          "--worker-threads", std::to_string(o.worker_threads)};
}

// execv() of this program as an exec child: argv is built before the call.
[[noreturn]] void ExecSelf(const char* mode, pid_t pre_exec_tid) {
  std::vector<std::string> args = {g_self, "--exec-child", mode, "--pre-exec-tid",
                                   std::to_string(pre_exec_tid)};
  for (std::string& a : WorkArgs()) args.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(g_self.c_str(), argv.data());
  Die("execv");
}

// A process with `extra_threads` threads besides its main thread; every one
// does the work.  `tag` names it (root, w0, g0, x...).  Forked children are
// started first, while the process still has one thread.
void RunProcess(const char* role, const char* tag, pid_t ppid, bool main_clean, int extra_threads,
                int workers, bool grandchild, bool exec_last_worker) {
  char name[16];
  Name(name, "gt-%s", tag);
  SetName(name);
  Tally t;

  std::vector<pid_t> children;
  const pid_t self = getpid();
  for (int i = 0; i < workers; ++i) {
    const pid_t child = Fork(t);
    if (child == 0) {
      if (exec_last_worker && i == workers - 1) ExecSelf("x", Tid());
      char child_tag[16];
      snprintf(child_tag, sizeof(child_tag), "w%d", i);
      RunProcess("worker", child_tag, self, true, g_opt.worker_threads, 0, i == 0, false);
      _exit(0);
    }
    children.push_back(child);
  }
  if (grandchild) {
    const pid_t child = Fork(t);
    if (child == 0) {
      char child_tag[16];
      snprintf(child_tag, sizeof(child_tag), "g%s", tag + 1);
      RunProcess("grandchild", child_tag, self, true, g_opt.worker_threads, 0, false, false);
      _exit(0);
    }
    children.push_back(child);
  }

  // Thread 0 takes part in the cross-thread rename handshake.
  int done[2] = {-1, -1}, renamed[2] = {-1, -1};
  if (extra_threads > 0 && !g_opt.leader_exits) {
    if (pipe2(done, O_CLOEXEC) != 0 || pipe2(renamed, O_CLOEXEC) != 0) Die("pipe");
  }
  // Never freed: with --leader-exits the main thread's pthread_exit unwinds
  // this frame, running its destructors, while the threads still read their
  // arguments (a vector here had a thread report a freed role string).
  ThreadArgs* args = new ThreadArgs[static_cast<size_t>(std::max(extra_threads, 0))]();
  std::vector<Started> started;
  for (int i = 0; i < extra_threads; ++i) {
    ThreadArgs& a = args[i];
    snprintf(a.role, sizeof(a.role), "thread");
    snprintf(a.first_name, sizeof(a.first_name), "gt-%s-t%d", tag, i);
    snprintf(a.last_name, sizeof(a.last_name), "gt-%s-t%d-end", tag, i);
    a.ppid = ppid;
    a.wait_for_leader = g_opt.leader_exits;
    a.done_fd = i == 0 ? done[1] : -1;
    a.renamed_fd = i == 0 ? renamed[0] : -1;
    a.waker_tid = Tid();
    started.push_back(StartThread(t, &a));
  }

  DoWork(t);
  Name(name, "gt-%s-end", tag);
  SetName(name);

  if (g_opt.leader_exits) {
    Report(role, ppid, main_clean, t);
    pthread_exit(nullptr);  // the threads carry on; their stacks stay mapped
  }
  if (done[0] >= 0) {
    pid_t tid = 0;
    if (read(done[0], &tid, sizeof(tid)) != sizeof(tid)) Die("handshake read");
    // Wait, on the CPU, until thread 0 sleeps in its read: our write then
    // is what wakes it.
    char path[64], stat[1024];
    memset(stat, 0, sizeof(stat));  // in user mode: no kernel-mode fault in read() (see Report)
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    for (;;) {
      ReadSmallFile(path, stat, sizeof(stat));
      const char* p = strrchr(stat, ')');
      if (p && p[2] == 'S') break;
      sched_yield();
    }
    char c = 'r';
    char other[16];
    snprintf(other, sizeof(other), "gt-%s-t0-x", tag);
    if (int err = pthread_setname_np(started[0].handle, other); err != 0) {
      errno = err;
      Die("pthread_setname_np");
    }
    if (write(renamed[1], &c, 1) != 1) Die("handshake write");
  }
  for (Started& s : started) JoinThread(t, s);
  for (pid_t child : children) {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      errno = 0;
      Die("a child failed");
    }
  }
  Report(role, ppid, main_clean, t);
}

long Number(const char* flag, const char* value) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(value, &end, 10);
  if (errno || !end || *end || v < 0) {
    fprintf(stderr, "ground_truth: %s needs a non-negative number, got '%s'\n", flag, value);
    exit(2);
  }
  return v;
}

void* ReexecThread(void*) {
  SetName("gt-pre-t");
  ExecSelf("e", Tid());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "ground_truth: %s needs a value\n", flag.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (flag == "--threads") g_opt.threads = static_cast<int>(Number(argv[i], value()));
    else if (flag == "--workers") g_opt.workers = static_cast<int>(Number(argv[i], value()));
    else if (flag == "--worker-threads") g_opt.worker_threads = static_cast<int>(Number(argv[i], value()));
    else if (flag == "--mmaps") g_opt.mmaps = Number(argv[i], value());
    else if (flag == "--mmap-bytes") g_opt.mmap_bytes = Number(argv[i], value());
    else if (flag == "--futex-waits") g_opt.futex_waits = Number(argv[i], value());
    else if (flag == "--futex-timeout-us") g_opt.futex_timeout_us = Number(argv[i], value());
    else if (flag == "--futex-wakes") g_opt.futex_wakes = Number(argv[i], value());
    else if (flag == "--touch-pages") g_opt.touch_pages = Number(argv[i], value());
    else if (flag == "--sleeps") g_opt.sleeps = Number(argv[i], value());
    else if (flag == "--sleep-us") g_opt.sleep_us = Number(argv[i], value());
    else if (flag == "--exec") g_opt.exec_worker = true;
    else if (flag == "--reexec") g_opt.reexec = value();
    else if (flag == "--leader-exits") g_opt.leader_exits = true;
    else if (flag == "--report") g_opt.report = value();
    else if (flag == "--exec-child") g_opt.exec_child = value();
    else if (flag == "--pre-exec-tid") g_opt.pre_exec_tid = Number(argv[i], value());
    else {
      fprintf(stderr, "ground_truth: unknown option %s (see ground_truth.cc)\n", flag.c_str());
      return 2;
    }
  }
  if (g_opt.report.empty() || g_opt.mmap_bytes == 0 ||
      (!g_opt.reexec.empty() && g_opt.reexec != "main" && g_opt.reexec != "thread")) {
    fprintf(stderr, "usage: ground_truth [options] --report FILE (see ground_truth.cc)\n");
    return 2;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) Die("readlink /proc/self/exe");
  self[n] = 0;
  g_self = self;
  OpenReport();

  if (!g_opt.exec_child.empty()) {
    // An exec'd image: a worker ("x", parent is the main process) or the main
    // process itself ("e").  The loader ran first, uncounted: not clean.
    const bool is_worker = g_opt.exec_child == "x";
    RunProcess(is_worker ? "exec" : "exec-main", is_worker ? "x" : "e", getppid(), false,
               g_opt.worker_threads, 0, false, false);
    return 0;
  }
  if (g_opt.reexec == "main") {
    SetName("gt-pre");
    ExecSelf("e", Tid());
  }
  if (g_opt.reexec == "thread") {
    SetName("gt-pre");
    pthread_t thread;
    if (int err = pthread_create(&thread, nullptr, ReexecThread, nullptr); err != 0) {
      errno = err;
      Die("pthread_create");
    }
    for (;;) pause();  // ended by the exec in the other thread
  }
  const pid_t ppid = getppid();
  RunProcess("main", "root", ppid, false, g_opt.threads, g_opt.leader_exits ? 0 : g_opt.workers,
             false, g_opt.exec_worker);
  return 0;
}
