// Now and then this kernel switches a traced thread back in with no
// sched_switch tracepoint (bpf/offcpu.h), and its off-CPU interval stays
// open.  Such an interval must end where the thread is next seen running:
// at its next syscall, or, with none before its next switch-out, that
// switch-out less the thread's run time since.  Sent at the switch-out
// with no length, a 5 ms sleep so lost made a Python loop's step look like
// 7 ms of CPU work, an "evaluation pass" the step finder cut out of a plain
// epoch.
//
// The kernel's lapse cannot be caused on purpose, so the test stands in for
// it: while tests/workloads/spin_until_told runs without a syscall, the
// test writes an open interval into the thread's state in the tracer's own
// maps (task storage, by pidfd; the syscall slot's mirror of it), as a
// switch-out whose switch-in went untraced leaves it, then lets the thread
// make its syscall, or first moves it to another CPU (a switch-out with no
// syscall).  Every other part is the real recording.  A real switch of the
// thread between the read and the write makes a round inconclusive (its
// interval then ends at a traced switch-in); the workload spins as a
// real-time thread so that such switches stay rare under load, and most
// rounds must be conclusive.  Needs root (eBPF).
#include <bpf/bpf.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
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
constexpr uint64_t kFakeOffCpuNs = 50'000'000;
// How stale the kernel's run time of a running thread may be when read
// from /proc: it is brought up to date at each scheduler tick (4 ms at
// HZ=250, 10 ms at HZ=100), and at every switch-out.
constexpr uint64_t kRunTimeStaleNs = 12'000'000;
// How long the thread spins between the write and its move to another CPU.
constexpr uint64_t kSpinBeforeMoveUs = 2'000;
// How long before the switch-out's tracepoint the scheduler last charged
// the thread its run time (picking the next task comes between them): an
// interval closed by the run time since ends that much past the read.
// 1 us seen on a VM whose hypervisor shadows the page tables.  Time the
// thread did not run between the read and the switch-out (the hypervisor
// took the vCPU: steal time is not run time) comes on top; the workload
// notes it.
constexpr uint64_t kSwitchPathNs = 20'000;

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

  // Leaves an open interval from `switched_out_ns`, with the thread's run
  // time then `run_ns`, as a switch-out whose switch-in went untraced
  // does; false while the thread is off the CPU for real (its own interval
  // is open).
  bool OpenInterval(uint64_t switched_out_ns, uint64_t run_ns) {
    gpuos_thread_state st{};
    if (bpf_map_lookup_elem(state_fd_, &pidfd_, &st) != 0 || st.sched.switched_out_ns != 0) return false;
    st.sched.switched_out_ns = switched_out_ns;
    st.sched.run_ns_at_switch_out = run_ns;
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
  uint64_t run_read_from_ns = 0;  // the thread's run time read from /proc between
  uint64_t run_read_until_ns = 0;  // ... these two clock readings
  uint64_t moved_ns = 0;          // when the test moved it to another CPU; 0: not moved
  uint64_t before_ns = 0;         // the thread's clock right before its syscall
  uint64_t after_ns = 0;          // ... and right after it returned
  // Stretches in which the spinning thread did not run, as it saw them
  // (start, end), and how many it could not note.
  std::vector<std::pair<uint64_t, uint64_t>> gaps;
  int gaps_lost = 0;

  // How long the thread did not run from `from_ns` to `until_ns`.
  uint64_t NotRunningNs(uint64_t from_ns, uint64_t until_ns) const {
    uint64_t total = 0;
    for (const auto& [start, end] : gaps) {
      const uint64_t lo = std::max(start, from_ns), hi = std::min(end, until_ns);
      if (hi > lo) total += hi - lo;
    }
    return total;
  }
};

// The kernel's run time of a thread (se.sum_exec_runtime, in ns), as
// /proc says it: up to date at its last tick or switch.
std::optional<uint64_t> RunTimeNs(uint32_t tid) {
  std::ifstream in(absl::StrCat("/proc/", tid, "/schedstat"));
  uint64_t run_ns = 0;
  if (!(in >> run_ns)) return std::nullopt;
  return run_ns;
}

// The CPU a thread last ran on (/proc/TID/stat, field 39).
int CpuOf(uint32_t tid) {
  std::ifstream in(absl::StrCat("/proc/", tid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t comm_end = stat.rfind(')');
  if (comm_end == std::string::npos) return -1;
  const std::vector<std::string> fields = absl::StrSplit(stat.substr(comm_end + 2), ' ');
  int cpu = -1;
  // Fields from the third (state) on: the 39th is the 37th here.
  if (fields.size() <= 36 || !absl::SimpleAtoi(fields[36], &cpu)) return -1;
  return cpu;
}

// Moves a running thread to another CPU this test may use: the kernel's
// stopper thread switches it out there and then, preempted, with no
// syscall of its own.  False with no other CPU, or when it did not move.
bool MoveToAnotherCpu(uint32_t tid) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  const int now_on = CpuOf(tid);
  int target = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && target < 0; ++cpu) {
    if (cpu != now_on && CPU_ISSET(cpu, &allowed)) target = cpu;
  }
  if (target < 0) return false;
  cpu_set_t to;
  CPU_ZERO(&to);
  CPU_SET(target, &to);
  if (sched_setaffinity(static_cast<pid_t>(tid), sizeof(to), &to) != 0) return false;
  return rt::WaitUntil([&] { return CpuOf(tid) == target; }, 5, 1);
}

// One traced run of spin_until_told (with the tracer's --syscall-slots
// `slots`; -1: its default) in which `stand_in` is called in each round
// while the thread spins, then the thread makes its syscall.
struct SpinRun {
  uint32_t tid = 0;
  std::vector<Round> rounds;
  std::vector<v1::Event> events;

  // The off-CPU event the stand-in switch-out of round r left, sent once.
  const v1::Event* IntervalOf(int r) const {
    const v1::Event* found = nullptr;
    for (const v1::Event& e : events) {
      if (e.tid() == tid && e.has_off_cpu() && e.ts_ns() == rounds[r].switched_out_ns) {
        EXPECT_EQ(found, nullptr) << "the open interval is sent once";
        found = &e;
      }
    }
    return found;
  }
  // Whether the thread had a real (traced) switch-out from `from_ns` to
  // `until_ns`, which would make its run time since then less than the
  // clock's.
  bool SwitchedOutBetween(uint64_t from_ns, uint64_t until_ns, uint64_t stand_in_ns) const {
    return FirstSwitchOutFrom(from_ns, stand_in_ns).value_or(until_ns) < until_ns;
  }
  // The thread's first traced switch-out at or after `from_ns`.
  std::optional<uint64_t> FirstSwitchOutFrom(uint64_t from_ns, uint64_t stand_in_ns) const {
    std::optional<uint64_t> first;
    for (const v1::Event& e : events) {
      if (e.tid() == tid && e.has_off_cpu() && e.ts_ns() != stand_in_ns && e.ts_ns() >= from_ns &&
          (!first || e.ts_ns() < *first)) {
        first = e.ts_ns();
      }
    }
    return first;
  }
};

using StandIn = std::function<void(TracerState& state, uint32_t tid, Round& round)>;

void RunSpinUntilTold(int slots, const StandIn& stand_in, SpinRun* run_out) {
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
  if (slots >= 0) {
    argv.push_back("--syscall-slots");
    argv.push_back(absl::StrCat(slots));
  }
  for (const std::string& arg : {std::string("--"), rt::WorkloadPath("spin_until_told"), std::string("--shared"),
                                 shared, std::string("--rounds"), absl::StrCat(kRounds), std::string("--report"),
                                 report}) {
    argv.push_back(arg);
  }
  rt::Child tracer = rt::Child::Start(argv);
  SpinRun& run = *run_out;
  run.rounds.assign(kRounds + 1, Round{});
  TracerState state;
  for (int r = 1; r <= kRounds; ++r) {
    ASSERT_TRUE(rt::WaitUntil([&] { return words[1].load() == static_cast<uint64_t>(r); }, 60, 1))
        << "round " << r << " never began";
    if (r == 1) {
      run.tid = static_cast<uint32_t>(words[0].load());
      ASSERT_TRUE(state.Find(static_cast<pid_t>(run.tid))) << "no tracer keeps the thread's state";
      EXPECT_EQ(state.has_slot(), slots != 0);
    }
    stand_in(state, run.tid, run.rounds[r]);
    words[2] = static_cast<uint64_t>(r);
  }
  // Then asleep for 300 ms: its interval is open, and so is the slot's
  // mirror of it (set at the real switch-out, cleared at the switch-ins).
  ASSERT_TRUE(rt::WaitUntil([&] { return words[1].load() == kRounds + 1u; }, 60, 1));
  usleep(50'000);
  EXPECT_TRUE(state.StateOffCpu());
  if (state.has_slot()) {
    EXPECT_TRUE(state.SlotOffCpu());
  }
  const rt::RunResult result = tracer.Wait(60);
  munmap(page, 4096);
  ASSERT_EQ(result.exit_code, 0) << result.Describe();

  const std::optional<std::string> lines = rt::ReadFile(report);
  ASSERT_TRUE(lines.has_value());
  for (absl::string_view line : absl::StrSplit(*lines, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ');
    int r = 0;
    ASSERT_TRUE(f.size() >= 3 && absl::SimpleAtoi(f[1], &r) && r >= 1 && r <= kRounds) << line;
    Round& round = run.rounds[r];
    if (f[0] == "round") {
      ASSERT_EQ(f.size(), 6u) << line;
      ASSERT_TRUE(absl::SimpleAtoi(f[3], &round.before_ns) && absl::SimpleAtoi(f[5], &round.after_ns)) << line;
    } else if (f[0] == "gap") {
      ASSERT_EQ(f.size(), 4u) << line;
      uint64_t start = 0, end = 0;
      ASSERT_TRUE(absl::SimpleAtoi(f[2], &start) && absl::SimpleAtoi(f[3], &end)) << line;
      round.gaps.emplace_back(start, end);
    } else {
      ASSERT_EQ(f[0], "gaps_lost") << line;
      ASSERT_TRUE(absl::SimpleAtoi(f[2], &round.gaps_lost)) << line;
    }
  }
  auto trace = rt::ReadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  run.events = std::move(trace->events);
}

// Leaves the stand-in open interval, retrying while the thread is off the
// CPU for real (preempted) now and then; notes when its run time was read.
void OpenStandInInterval(TracerState& state, uint32_t tid, Round& round) {
  for (int attempt = 0; attempt < 200 && round.switched_out_ns == 0; ++attempt) {
    const uint64_t from = MonotonicNs();
    const std::optional<uint64_t> run_ns = RunTimeNs(tid);
    const uint64_t until = MonotonicNs();
    if (run_ns && state.OpenInterval(from - kFakeOffCpuNs, *run_ns)) {
      round.switched_out_ns = from - kFakeOffCpuNs;
      round.run_read_from_ns = from;
      round.run_read_until_ns = until;
    } else {
      usleep(1000);
    }
  }
}

// Parameter: the tracer's --syscall-slots (-1: its default, so the thread
// has a slot; 0: it keeps its state in task storage only).
class RecordingUnseenSwitchIn : public ::testing::TestWithParam<int> {};

TEST_P(RecordingUnseenSwitchIn, AnIntervalWhoseSwitchInWentUntracedEndsAtTheThreadsNextSyscall) {
  GPUOS_REQUIRE_ROOT();
  SpinRun run;
  ASSERT_NO_FATAL_FAILURE(RunSpinUntilTold(GetParam(), OpenStandInInterval, &run));
  int conclusive = 0;
  for (int r = 1; r <= kRounds; ++r) {
    SCOPED_TRACE(absl::StrCat("round ", r));
    const Round& round = run.rounds[r];
    if (round.switched_out_ns == 0) continue;
    const v1::Event* found = run.IntervalOf(r);
    ASSERT_NE(found, nullptr) << "the open interval is sent";
    const v1::OffCpu& off = found->off_cpu();
    // A real switch-out and -in between the test's read and write: that
    // traced switch-in closed it.
    if (!off.switch_in_unseen()) continue;
    ++conclusive;
    EXPECT_TRUE(off.end_seen_running()) << "closed at the syscall, not at the next switch-out";
    EXPECT_FALSE(off.end_from_run_time());
    const uint64_t end = found->ts_ns() + off.duration_ns();
    EXPECT_GE(end, round.before_ns) << "it ends at the syscall, not before";
    EXPECT_LE(end, round.after_ns) << "its syscall had returned by then";
    EXPECT_EQ(off.syscall_nr(), SYS_nanosleep);
  }
  EXPECT_GE(conclusive, kMinConclusiveRounds);
}

// With no syscall before its next switch-out (here: moved to another CPU,
// preempted by the kernel's stopper), the interval ends that switch-out
// less the thread's run time since: where the run time was last brought up
// to date before the test read it, not at the switch-out after it, nor
// with no length.
TEST_P(RecordingUnseenSwitchIn, WithNoSyscallBeforeItsNextSwitchOutItEndsThereLessTheRunTimeSince) {
  GPUOS_REQUIRE_ROOT();
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs two CPUs to move the thread between";
  SpinRun run;
  ASSERT_NO_FATAL_FAILURE(RunSpinUntilTold(
      GetParam(),
      [](TracerState& state, uint32_t tid, Round& round) {
        OpenStandInInterval(state, tid, round);
        if (round.switched_out_ns == 0) return;
        usleep(kSpinBeforeMoveUs);
        round.moved_ns = MonotonicNs();
        if (!MoveToAnotherCpu(tid)) round.moved_ns = 0;
      },
      &run));
  int conclusive = 0;
  for (int r = 1; r <= kRounds; ++r) {
    SCOPED_TRACE(absl::StrCat("round ", r));
    const Round& round = run.rounds[r];
    if (round.switched_out_ns == 0 || round.moved_ns == 0) continue;
    const v1::Event* found = run.IntervalOf(r);
    ASSERT_NE(found, nullptr) << "the open interval is sent";
    const v1::OffCpu& off = found->off_cpu();
    // A real switch-out after the run time was read: the thread's run
    // time since is less than the clock's.
    // Its not-running time can be bounded only where the workload noted
    // every stretch of it.
    if (!off.switch_in_unseen() || round.gaps_lost > 0 ||
        run.SwitchedOutBetween(round.run_read_from_ns, round.moved_ns, round.switched_out_ns)) {
      continue;
    }
    const std::optional<uint64_t> switch_out = run.FirstSwitchOutFrom(round.moved_ns, round.switched_out_ns);
    ASSERT_TRUE(switch_out.has_value()) << "the move's switch-out is traced";
    ++conclusive;
    EXPECT_TRUE(off.end_from_run_time()) << "closed at the switch-out, by the run time since";
    EXPECT_FALSE(off.end_seen_running());
    const uint64_t end = found->ts_ns() + off.duration_ns();
    const uint64_t not_running = round.NotRunningNs(round.run_read_from_ns, *switch_out);
    EXPECT_GE(end + kRunTimeStaleNs, round.run_read_from_ns) << "the run time was at most a tick stale";
    EXPECT_LE(end, round.run_read_until_ns + kSwitchPathNs + not_running)
        << "the run time read was brought up to date before the read (the thread did not run for " << not_running
        << " ns between the read and its switch-out)";
    EXPECT_LT(end, round.moved_ns) << "it ends before the switch-out";
  }
  EXPECT_GE(conclusive, kMinConclusiveRounds);
}

INSTANTIATE_TEST_SUITE_P(SlotOrTaskStorage, RecordingUnseenSwitchIn, ::testing::Values(-1, 0),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(p.param == 0 ? "WithoutSyscallSlots" : "WithASyscallSlot");
                         });

}  // namespace
}  // namespace gpuos
