// Now and then this kernel switches a traced thread back in with no
// sched_switch tracepoint (bpf/offcpu.h), and its off-CPU interval stays
// open.  Such an interval must end where the thread is next seen running,
// at its next syscall, not at its next switch-out with no length: a 5 ms
// sleep so lost made a Python loop's step look like 7 ms of CPU work, an
// "evaluation pass" the step finder cut out of a plain epoch.
//
// The kernel's lapse cannot be caused on purpose, so the test stands in for
// it: while tests/workloads/spin_until_told runs without a syscall, the
// test writes an open interval into the thread's state in the tracer's own
// maps (task storage, by pidfd; the syscall slot's mirror of it), as a
// switch-out whose switch-in went untraced leaves it, then lets the thread
// make its syscall.  Every other part is the real recording.  A real switch
// of the thread between the read and the write makes a round inconclusive
// (its interval then ends at a traced switch-in); the workload spins as a
// real-time thread so that such switches stay rare under load, and most
// rounds must be conclusive.  Needs root (eBPF).
#include <bpf/bpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bpf/thread_state.h"
#include "common/monotonic_clock.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

constexpr int kRounds = 8;
constexpr int kMinConclusiveRounds = 4;
// How far before the write the stand-in switch-out lies.
constexpr uint64_t kFakeOffCpuNs = 10'000'000;

// An fd of each map named `name` whose value is `value_size` bytes.
std::vector<int> MapsNamed(const std::string& name, uint32_t value_size) {
  std::vector<int> fds;
  uint32_t id = 0;
  while (bpf_map_get_next_id(id, &id) == 0) {
    const int fd = bpf_map_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && name == info.name && info.value_size == value_size) {
      fds.push_back(fd);
    } else {
      close(fd);
    }
  }
  return fds;
}

// The tracer's view of one thread: its task storage and, where it has one,
// its syscall slot (mapped).
class TracerState {
 public:
  ~TracerState() {
    if (slots_ != nullptr) munmap(slots_, slots_len_);
    for (int fd : fds_) close(fd);
    if (pidfd_ >= 0) close(pidfd_);
  }

  // Finds the thread's state; false when no tracer keeps one.
  bool Find(pid_t tid) {
    tid_ = static_cast<uint32_t>(tid);
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, tid, 0));
    if (pidfd_ < 0) return false;
    for (int fd : MapsNamed("thread_state", sizeof(gpuos_thread_state))) {
      fds_.push_back(fd);
      gpuos_thread_state st{};
      if (state_fd_ < 0 && bpf_map_lookup_elem(fd, &pidfd_, &st) == 0) state_fd_ = fd;
    }
    for (int fd : MapsNamed("syscall_slots", sizeof(gpuos_syscall_slot))) {
      fds_.push_back(fd);
      if (slot_ == nullptr) MapSlotOf(fd);
    }
    return state_fd_ >= 0;
  }
  bool has_slot() const { return slot_ != nullptr; }
  // What the kernel side holds now: an open interval in the state, and
  // the slot's mirror of it.
  bool StateOffCpu() const {
    gpuos_thread_state st{};
    return bpf_map_lookup_elem(state_fd_, &pidfd_, &st) == 0 && st.sched.switched_out_ns != 0;
  }
  bool SlotOffCpu() const {
    return reinterpret_cast<const std::atomic<uint32_t>*>(&slot_->off_cpu_open)->load() != 0;
  }

  // Leaves an open interval from `switched_out_ns`, as a switch-out whose
  // switch-in went untraced does; false while the thread is off the CPU
  // for real (its own interval is open).
  bool OpenInterval(uint64_t switched_out_ns) {
    gpuos_thread_state st{};
    if (bpf_map_lookup_elem(state_fd_, &pidfd_, &st) != 0 || st.sched.switched_out_ns != 0) return false;
    st.sched.switched_out_ns = switched_out_ns;
    st.sched.woken_ns = 0;
    st.sched.prev_state = 1;
    st.sched.syscall_nr = SYS_nanosleep;
    st.sched.cause = GPUOS_OFFCPU_SYSCALL;
    st.sched.woken_by_tid = 0;
    st.sched.waker_pid = 0;
    st.sched.waker_flags = 0;
    if (bpf_map_update_elem(state_fd_, &pidfd_, &st, BPF_EXIST) != 0) return false;
    if (slot_ != nullptr) reinterpret_cast<std::atomic<uint32_t>*>(&slot_->off_cpu_open)->store(1);
    return true;
  }

 private:
  void MapSlotOf(int fd) {
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || !(info.map_flags & BPF_F_MMAPABLE)) return;
    const size_t stride = (sizeof(gpuos_syscall_slot) + 7) & ~size_t{7};
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t length = (info.max_entries * stride + page - 1) / page * page;
    void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return;
    for (uint32_t i = 0; i < info.max_entries; ++i) {
      auto* s = reinterpret_cast<gpuos_syscall_slot*>(static_cast<char*>(base) + i * stride);
      if (s->tid == tid_ && (s->seq & 1)) {
        slots_ = base;
        slots_len_ = length;
        slot_ = s;
        return;
      }
    }
    munmap(base, length);
  }

  uint32_t tid_ = 0;
  int pidfd_ = -1;
  int state_fd_ = -1;
  std::vector<int> fds_;
  void* slots_ = nullptr;
  size_t slots_len_ = 0;
  gpuos_syscall_slot* slot_ = nullptr;
};

struct Round {
  uint64_t switched_out_ns = 0;  // the stand-in switch-out; 0: none made
  uint64_t before_ns = 0;        // the thread's clock right before its syscall
  uint64_t after_ns = 0;         // ... and right after it returned
};

// Parameter: the tracer's --syscall-slots (-1: its default, so the thread
// has a slot; 0: it keeps its state in task storage only).
class RecordingUnseenSwitchIn : public ::testing::TestWithParam<int> {};

TEST_P(RecordingUnseenSwitchIn, AnIntervalWhoseSwitchInWentUntracedEndsAtTheThreadsNextSyscall) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string shared = dir.File("shared"), report = dir.File("report"), trace_path = dir.File("t.gpuos");
  ASSERT_TRUE(rt::WriteFile(shared, std::string(4096, '\0')));
  const int shared_fd = open(shared.c_str(), O_RDWR);
  ASSERT_GE(shared_fd, 0);
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0);
  close(shared_fd);
  ASSERT_NE(page, MAP_FAILED);
  auto* words = static_cast<std::atomic<uint64_t>*>(page);

  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", trace_path};
  if (GetParam() >= 0) {
    argv.push_back("--syscall-slots");
    argv.push_back(absl::StrCat(GetParam()));
  }
  for (const std::string& arg : {std::string("--"), rt::WorkloadPath("spin_until_told"), std::string("--shared"),
                                 shared, std::string("--rounds"), absl::StrCat(kRounds), std::string("--report"),
                                 report}) {
    argv.push_back(arg);
  }
  rt::Child tracer = rt::Child::Start(argv);
  std::vector<Round> rounds(kRounds + 1);
  TracerState state;
  uint32_t tid = 0;
  for (int r = 1; r <= kRounds; ++r) {
    ASSERT_TRUE(rt::WaitUntil([&] { return words[1].load() == static_cast<uint64_t>(r); }, 60, 1))
        << "round " << r << " never began";
    if (r == 1) {
      tid = static_cast<uint32_t>(words[0].load());
      ASSERT_TRUE(state.Find(static_cast<pid_t>(tid))) << "no tracer keeps the thread's state";
      EXPECT_EQ(state.has_slot(), GetParam() != 0);
    }
    // The thread may be off the CPU for real (preempted) now and then.
    for (int attempt = 0; attempt < 200 && rounds[r].switched_out_ns == 0; ++attempt) {
      const uint64_t out = MonotonicNs() - kFakeOffCpuNs;
      if (state.OpenInterval(out)) {
        rounds[r].switched_out_ns = out;
      } else {
        usleep(1000);
      }
    }
    words[2] = static_cast<uint64_t>(r);
  }
  // Then asleep for 300 ms: its interval is open, and so is the slot's
  // mirror of it (set at the real switch-out, cleared at the switch-ins).
  ASSERT_TRUE(rt::WaitUntil([&] { return words[1].load() == kRounds + 1u; }, 60, 1));
  usleep(50'000);
  EXPECT_TRUE(state.StateOffCpu());
  if (state.has_slot()) EXPECT_TRUE(state.SlotOffCpu());
  const rt::RunResult run = tracer.Wait(60);
  munmap(page, 4096);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();

  const std::optional<std::string> lines = rt::ReadFile(report);
  ASSERT_TRUE(lines.has_value());
  for (absl::string_view line : absl::StrSplit(*lines, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 6u) << line;
    int r = 0;
    ASSERT_TRUE(absl::SimpleAtoi(f[1], &r) && r >= 1 && r <= kRounds) << line;
    ASSERT_TRUE(absl::SimpleAtoi(f[3], &rounds[r].before_ns) && absl::SimpleAtoi(f[5], &rounds[r].after_ns)) << line;
  }
  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  int conclusive = 0;
  for (int r = 1; r <= kRounds; ++r) {
    SCOPED_TRACE(absl::StrCat("round ", r));
    if (rounds[r].switched_out_ns == 0) continue;
    const v1::Event* found = nullptr;
    int sent = 0;
    for (const v1::Event& e : trace->events) {
      if (e.tid() == tid && e.has_off_cpu() && e.ts_ns() == rounds[r].switched_out_ns) {
        found = &e;
        ++sent;
      }
    }
    ASSERT_EQ(sent, 1) << "the open interval is sent once";
    const v1::OffCpu& off = found->off_cpu();
    // A real switch-out and -in between the test's read and write: that
    // traced switch-in closed it.
    if (!off.switch_in_unseen()) continue;
    ++conclusive;
    EXPECT_TRUE(off.end_seen_running()) << "closed at the syscall, not at the next switch-out";
    const uint64_t end = found->ts_ns() + off.duration_ns();
    EXPECT_GE(end, rounds[r].before_ns) << "it ends at the syscall, not before";
    EXPECT_LE(end, rounds[r].after_ns) << "its syscall had returned by then";
    EXPECT_EQ(off.syscall_nr(), SYS_nanosleep);
  }
  EXPECT_GE(conclusive, kMinConclusiveRounds);
}

INSTANTIATE_TEST_SUITE_P(SlotOrTaskStorage, RecordingUnseenSwitchIn, ::testing::Values(-1, 0),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(p.param == 0 ? "WithoutSyscallSlots" : "WithASyscallSlot");
                         });

}  // namespace
}  // namespace gpuos
