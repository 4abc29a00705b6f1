// The kernel's syscall restart rule, applied by hand; see syscall_restart.h.
#include "inject/syscall_restart.h"

#include <sys/syscall.h>

#include <cstdint>

namespace gpuos::inject {
namespace {

// include/linux/errno.h: never seen by user space, only by a tracer.
constexpr int64_t kErestartSys = 512;
constexpr int64_t kErestartNoIntr = 513;
constexpr int64_t kErestartNoHand = 514;
constexpr int64_t kErestartRestartBlock = 516;

}  // namespace

struct user_regs_struct ResumeRegisters(const struct user_regs_struct& stopped) {
  struct user_regs_struct regs = stopped;
  if (static_cast<int64_t>(stopped.orig_rax) >= 0) {
    switch (-static_cast<int64_t>(stopped.rax)) {
      case kErestartSys:
      case kErestartNoIntr:
      case kErestartNoHand:
        regs.rax = stopped.orig_rax;
        regs.rip -= 2;
        break;
      case kErestartRestartBlock:
        regs.rax = SYS_restart_syscall;
        regs.rip -= 2;
        break;
      default:
        break;
    }
  }
  regs.orig_rax = static_cast<unsigned long long>(-1);
  return regs;
}

}  // namespace gpuos::inject
