// count_bpf_programs NAME: how many BPF programs called NAME the kernel has
// loaded now (any process's).  bench/run_overhead.sh uses it to tell
// whether another gpuos-trace is tracing (or a just-exited one's programs
// are still attached) on machines without bpftool, such as the GPU
// machine: a round timed while one is would pay for two tracers.
//
// count_bpf_programs --stats NAME...: for each loaded program of these
// names, its run count and mean run time (kernel.bpf_stats_enabled must
// be 1; the figures include bpf_stats' own clock reads).
//
// Raw bpf() calls, so that it needs no library.  Needs root.
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

long Bpf(int command, bpf_attr* attr) { return syscall(SYS_bpf, command, attr, sizeof(*attr)); }

// Calls visit(id, info) for every loaded program; false on a bpf() error.
bool ForEachProgram(const std::function<void(__u32, const bpf_prog_info&)>& visit) {
  __u32 id = 0;
  for (;;) {
    bpf_attr attr{};
    attr.start_id = id;
    if (Bpf(BPF_PROG_GET_NEXT_ID, &attr) != 0) {
      if (errno == ENOENT) return true;
      fprintf(stderr, "count_bpf_programs: BPF_PROG_GET_NEXT_ID: %s\n", strerror(errno));
      return false;
    }
    id = attr.next_id;
    bpf_attr by_id{};
    by_id.prog_id = id;
    int fd = static_cast<int>(Bpf(BPF_PROG_GET_FD_BY_ID, &by_id));
    if (fd < 0) continue;  // unloaded meanwhile
    bpf_prog_info info{};
    bpf_attr get_info{};
    get_info.info.bpf_fd = fd;
    get_info.info.info_len = sizeof(info);
    get_info.info.info = reinterpret_cast<__u64>(&info);
    if (Bpf(BPF_OBJ_GET_INFO_BY_FD, &get_info) == 0) visit(id, info);
    close(fd);
  }
}

// The kernel keeps BPF_OBJ_NAME_LEN - 1 characters of a program's name.
bool NameIs(const bpf_prog_info& info, const char* name) {
  return strncmp(info.name, name, BPF_OBJ_NAME_LEN - 1) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool stats = argc > 1 && strcmp(argv[1], "--stats") == 0;
  std::vector<const char*> names(argv + 1 + (stats ? 1 : 0), argv + argc);
  if (names.empty() || (!stats && names.size() != 1)) {
    fprintf(stderr, "usage: count_bpf_programs NAME | --stats NAME...\n");
    return 2;
  }
  unsigned count = 0;
  bool ok = ForEachProgram([&](__u32 id, const bpf_prog_info& info) {
    for (const char* name : names) {
      if (!NameIs(info, name)) continue;
      ++count;
      if (stats) {
        printf("prog=%s id=%u run_cnt=%llu run_time_ns=%llu ns_per_run=%.1f\n", name, id,
               static_cast<unsigned long long>(info.run_cnt),
               static_cast<unsigned long long>(info.run_time_ns),
               info.run_cnt ? static_cast<double>(info.run_time_ns) / info.run_cnt : 0.0);
      }
    }
  });
  if (!ok) return 1;
  if (!stats) printf("%u\n", count);
  return 0;
}
