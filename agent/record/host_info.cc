// Host facts for trace headers; see host_info.h.
#include "record/host_info.h"

#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/valid_utf8.h"
#include "common/syscall_names.h"
#include "stream/record_framing.h"

namespace gpuos {
namespace {

uint64_t ReadNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

uint64_t MonotonicNowNs() { return ReadNs(CLOCK_MONOTONIC); }

v1::ClockPair ReadClockPair() {
  v1::ClockPair best;
  uint64_t best_gap = ~0ull;
  for (int i = 0; i < 5; ++i) {
    uint64_t before = ReadNs(CLOCK_MONOTONIC);
    uint64_t real = ReadNs(CLOCK_REALTIME);
    uint64_t after = ReadNs(CLOCK_MONOTONIC);
    if (after - before < best_gap) {
      best_gap = after - before;
      best.set_monotonic_ns(before + (after - before) / 2);
      best.set_realtime_ns(real);
      // realtime was read somewhere between before and after.
      best.set_uncertainty_ns((best_gap + 1) / 2);
    }
  }
  return best;
}

void FillHostInfo(v1::TraceHeader* header) {
  header->set_format_version(kFormatVersion);
  struct utsname uts {};
  if (uname(&uts) == 0) {
    header->set_hostname(ValidUtf8(uts.nodename));
    header->set_kernel_release(uts.release);
    header->set_arch(uts.machine);
  }
  header->set_page_size(static_cast<uint32_t>(sysconf(_SC_PAGESIZE)));
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 0) header->set_online_cpus(static_cast<uint32_t>(cpus));
  for (const auto& [nr, name] : SyscallNameTable()) (*header->mutable_syscall_names())[nr] = name;
  *header->mutable_start_clock() = ReadClockPair();
}

}  // namespace gpuos
