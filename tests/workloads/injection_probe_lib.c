// The library library_injection_test injects.  Its entry follows the
// contract of gpuos_shim_attach_entry: it records how it was called in
// "<argument>.entry" (proof that it ran, on which thread, with which
// argument), returns at once, and leaves a thread behind that unmaps the
// injector's stub pages once the borrowed thread has left them (blocked in
// a syscall with its pc outside the pages, or exited), then reports that in
// "<argument>.unmapped".  Gives up after 30 s and leaves the pages mapped.
// gpuos_probe_slow_entry does the same after sleeping 2 s (an entry that
// outlasts the injector's timeout).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int g_constructor_runs;

__attribute__((constructor)) static void ProbeConstructor(void) { ++g_constructor_runs; }

struct UnmapJob {
  uintptr_t page;
  size_t size;
  int tid;
  char report[4096];
};

static void WriteText(const char* path, const char* text) {
  char temp[4200];
  snprintf(temp, sizeof(temp), "%s.tmp", path);
  int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t ignored = write(fd, text, strlen(text));
  (void)ignored;
  close(fd);
  rename(temp, path);  // readers see the whole file or none
}

// 1: thread `tid` is blocked in a syscall with its pc outside the pages or
// has exited; 0: not yet.
static int LeftThePages(const struct UnmapJob* job) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", job->tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  char text[512];
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  // "nr a1 a2 a3 a4 a5 a6 sp pc", "-1 sp pc" or "running".
  if (text[0] < '0' || text[0] > '9') return 0;
  char* last = strrchr(text, ' ');
  if (last == NULL) return 0;
  uintptr_t pc = (uintptr_t)strtoull(last + 1, NULL, 16);
  return pc < job->page || pc >= job->page + job->size;
}

static void* UnmapWhenLeft(void* arg) {
  struct UnmapJob* job = arg;
  char text[256];
  int checks = 0;
  for (; checks < 30000; ++checks) {
    if (LeftThePages(job)) {
      int rc = munmap((void*)job->page, job->size);
      snprintf(text, sizeof(text), "unmapped=1 rc=%d checks=%d page=%#lx\n", rc, checks,
               (unsigned long)job->page);
      WriteText(job->report, text);
      free(job);
      return NULL;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  snprintf(text, sizeof(text), "unmapped=0 checks=%d\n", checks);
  WriteText(job->report, text);
  free(job);
  return NULL;
}

__attribute__((visibility("default"))) void gpuos_probe_entry(const char* argument,
                                                               uintptr_t stub_page,
                                                               size_t stub_size, int stub_tid) {
  char path[4096];
  char text[4096 + 256];
  snprintf(path, sizeof(path), "%s.entry", argument);
  snprintf(text, sizeof(text),
           "argument=%s page=%#lx size=%zu tid=%d gettid=%ld pid=%d constructor_runs=%d\n",
           argument, (unsigned long)stub_page, stub_size, stub_tid, (long)syscall(SYS_gettid),
           getpid(), g_constructor_runs);
  WriteText(path, text);

  struct UnmapJob* job = calloc(1, sizeof(*job));
  if (job == NULL) return;
  job->page = stub_page;
  job->size = stub_size;
  job->tid = stub_tid;
  snprintf(job->report, sizeof(job->report), "%s.unmapped", argument);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  if (pthread_create(&thread, &attr, UnmapWhenLeft, job) != 0) free(job);
  pthread_attr_destroy(&attr);
}

__attribute__((visibility("default"))) void gpuos_probe_slow_entry(const char* argument,
                                                                    uintptr_t stub_page,
                                                                    size_t stub_size,
                                                                    int stub_tid) {
  struct timespec two_seconds = {2, 0};
  while (nanosleep(&two_seconds, &two_seconds) != 0 && errno == EINTR) {
  }
  gpuos_probe_entry(argument, stub_page, stub_size, stub_tid);
}
