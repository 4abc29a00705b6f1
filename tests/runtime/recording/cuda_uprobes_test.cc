// CUDA driver API calls recorded with eBPF uprobes on a process's libcuda
// (BpfSession::AttachCudaUprobes, the attach fallback when the CUPTI shim
// cannot be put into a running process).  No GPU and no driver here: the
// library is tests/workloads/fake_libcuda.c, built as libcuda.so.1 with the
// driver's symbol names and signatures, and uprobe_cuda_caller calls it on
// two threads and prints every call it made; the recording must match that
// call for call.  The real libcuda is checked on the GPU machine (the
// known-work CUDA program traced with uprobes instead of the shim).
// Needs root (eBPF).
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bpf/cuda_uprobes.h"
#include "gtest/gtest.h"
#include "record/bpf_session.h"
#include "record/mapped_library.h"
#include "record/event_decoder.h"
#include "record/sources/cuda_uprobes_source.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

// fake_libcuda.c's sleeps.
constexpr uint64_t kStreamSyncNs = 2'000'000;
constexpr uint64_t kEventSyncNs = 1'000'000;
constexpr uint64_t kCtxSyncNs = 3'000'000;

std::string FakeLibcuda() { return rt::WorkloadPath("fake_cuda/libcuda.so.1"); }

// uprobe_cuda_caller with its stdout on a pipe, read line by line.
class Caller {
 public:
  explicit Caller(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ~Caller() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  pid_t pid() const { return pid_; }
  const std::vector<std::string>& lines() const { return lines_; }

  // Reads until a line starting with `prefix` arrives (returned), the pipe
  // closes or timeout_s passes (empty).  `idle` runs between reads.
  std::string ReadUntil(const std::string& prefix, double timeout_s,
                        const std::function<void()>& idle = nullptr) {
    double deadline = rt::MonotonicSeconds() + timeout_s;
    while (true) {
      for (; scanned_ < lines_.size(); ++scanned_) {
        if (absl::StartsWith(lines_[scanned_], prefix)) return lines_[scanned_++];
      }
      if (closed_ || rt::MonotonicSeconds() > deadline) return "";
      struct pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 10) > 0) {
        char buf[65536];
        ssize_t n = read(fd_, buf, sizeof(buf));
        if (n <= 0) {
          closed_ = true;
        } else {
          partial_.append(buf, static_cast<size_t>(n));
          size_t nl;
          while ((nl = partial_.find('\n')) != std::string::npos) {
            lines_.push_back(partial_.substr(0, nl));
            partial_.erase(0, nl + 1);
          }
        }
      }
      if (idle) idle();
    }
  }

  void Go() const { kill(pid_, SIGUSR1); }

  // The exit status once the process ends (-1 on timeout).
  int Wait(double timeout_s) {
    std::optional<int> status = rt::WaitForPid(pid_, timeout_s);
    if (!status) return -1;
    reaped_ = true;
    return *status;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  bool closed_ = false;
  std::string partial_;
  std::vector<std::string> lines_;
  size_t scanned_ = 0;
};

// "key=value" fields of a caller line.
std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> out;
  for (absl::string_view part : absl::StrSplit(line, ' ')) {
    size_t eq = part.find('=');
    if (eq != absl::string_view::npos) {
      out[std::string(part.substr(0, eq))] = std::string(part.substr(eq + 1));
    }
  }
  return out;
}

uint64_t U64(const std::string& s, int base = 10) {
  return std::stoull(s, nullptr, base);
}

struct Symbol {
  uint64_t address = 0;
  uint64_t vaddr = 0;
};

// The caller's "sym NAME ADDR VADDR" lines.
std::map<std::string, Symbol> Symbols(const std::vector<std::string>& lines) {
  std::map<std::string, Symbol> out;
  for (const std::string& line : lines) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() == 4 && parts[0] == "sym") {
      out[parts[1]] = {U64(parts[2], 16), U64(parts[3], 16)};
    }
  }
  return out;
}

// What a probe at each address reports: the first name of
// bpf/cuda_uprobes.h's list that the library gives that address.
std::map<std::string, std::string> RecordedNames(const std::map<std::string, Symbol>& symbols) {
  std::map<uint64_t, std::string> first;
  for (uint32_t id = 0; id < GPUOS_CUDA_FN_COUNT; ++id) {
    auto it = symbols.find(CudaUprobeFunctionName(id));
    if (it != symbols.end()) first.emplace(it->second.address, it->first);
  }
  std::map<std::string, std::string> out;
  for (const auto& [name, sym] : symbols) out[name] = first.at(sym.address);
  return out;
}

// One call, as the caller made it or as the probes recorded it.
struct CallRecord {
  uint32_t tid = 0;
  std::string name;
  uint64_t bytes = 0;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  int32_t ret = 0;
  uint64_t start = 0;  // caller: before the call; recording: entry
  uint64_t end = 0;    // caller: after the call; recording: entry + duration

  std::string Key() const {
    return absl::StrCat(name, " bytes=", bytes, " grid=", grid[0], ",", grid[1], ",", grid[2],
                        " block=", block[0], ",", block[1], ",", block[2], " ret=", ret);
  }
};

std::vector<CallRecord> CallerCalls(const std::vector<std::string>& lines,
                                    const std::map<std::string, std::string>& recorded_names) {
  std::vector<CallRecord> out;
  for (const std::string& line : lines) {
    if (!absl::StartsWith(line, "call ")) continue;
    auto f = Fields(line);
    CallRecord c;
    c.tid = static_cast<uint32_t>(U64(f["tid"]));
    c.name = recorded_names.count(f["name"]) ? recorded_names.at(f["name"]) : f["name"];
    c.bytes = U64(f["bytes"]);
    std::vector<std::string> g = absl::StrSplit(f["grid"], ',');
    std::vector<std::string> b = absl::StrSplit(f["block"], ',');
    for (int i = 0; i < 3; ++i) {
      c.grid[i] = static_cast<uint32_t>(U64(g.at(i)));
      c.block[i] = static_cast<uint32_t>(U64(b.at(i)));
    }
    c.ret = std::stoi(f["ret"]);
    c.start = U64(f["start"]);
    c.end = U64(f["end"]);
    out.push_back(c);
  }
  return out;
}

// A BpfSession whose CUDA call records are kept.
struct Session {
  std::unique_ptr<BpfSession> bpf;
  std::vector<v1::Event> events;
  int undecodable = 0;

  static std::unique_ptr<Session> Start(bool uprobe_multi = true,
                                        uint64_t ring_bytes = 16ull << 20) {
    auto s = std::make_unique<Session>();
    BpfSessionOptions options;
    options.ring_buffer_bytes = ring_bytes;
    options.cuda_uprobe_multi = uprobe_multi;
    Session* raw = s.get();
    auto bpf = BpfSession::Start(options, [raw](const void* data, size_t size) {
      v1::Event event;
      if (DecodeBpfRecord(data, size, &event, [raw](v1::Event& e) {
            if (e.has_cuda_api()) raw->events.push_back(e);
          }) != DecodeResult::kOk) {
        raw->undecodable++;
      }
    });
    EXPECT_TRUE(bpf.ok()) << bpf.status();
    if (!bpf.ok()) return nullptr;
    s->bpf = *std::move(bpf);
    return s;
  }

  void Drain() {
    while (true) {
      absl::StatusOr<int> n = bpf->Consume();
      ASSERT_TRUE(n.ok()) << n.status();
      if (*n == 0) break;
    }
  }

  std::vector<CallRecord> Recorded(uint32_t pid) const {
    std::vector<CallRecord> out;
    for (const v1::Event& e : events) {
      if (e.pid() != pid) continue;
      const v1::CudaApiCall& a = e.cuda_api();
      CallRecord c;
      c.tid = e.tid();
      c.name = a.name();
      c.bytes = a.bytes();
      c.grid[0] = a.grid_x(), c.grid[1] = a.grid_y(), c.grid[2] = a.grid_z();
      c.block[0] = a.block_x(), c.block[1] = a.block_y(), c.block[2] = a.block_z();
      c.ret = a.return_value();
      c.start = e.ts_ns();
      c.end = e.ts_ns() + a.duration_ns();
      out.push_back(c);
    }
    return out;
  }

  uint64_t Drops() const { return bpf->ReadDrops().total; }
};

size_t CountPid(const std::vector<v1::Event>& events, uint32_t pid) {
  return static_cast<size_t>(std::count_if(events.begin(), events.end(),
                                           [pid](const v1::Event& e) { return e.pid() == pid; }));
}

// Starts a caller on `library` and waits for its "ready".
std::unique_ptr<Caller> StartCaller(const std::string& library, const std::string& mode,
                                    long count) {
  auto caller = std::make_unique<Caller>(std::vector<std::string>{
      rt::WorkloadPath("uprobe_cuda_caller"), library, mode, std::to_string(count)});
  std::string ready = caller->ReadUntil("ready ", 20);
  EXPECT_FALSE(ready.empty()) << "uprobe_cuda_caller did not start";
  if (ready.empty()) return nullptr;
  return caller;
}

// Runs one round of the caller's plan and waits for its end, draining the
// session's ring buffer meanwhile (if there is a session).
void RunRound(Caller* caller, Session* session, int round) {
  caller->Go();
  std::string done = caller->ReadUntil(absl::StrCat("done ", round), 60, [session] {
    if (session) session->Drain();
  });
  ASSERT_FALSE(done.empty()) << "uprobe_cuda_caller did not finish round " << round;
}

// Every recorded call of the caller, compared with what it says it did,
// thread by thread in time order.
void ExpectRecordedExactly(const std::vector<CallRecord>& made,
                           const std::vector<CallRecord>& recorded) {
  std::map<uint32_t, std::vector<CallRecord>> by_thread_made, by_thread_recorded;
  for (const CallRecord& c : made) by_thread_made[c.tid].push_back(c);
  for (const CallRecord& c : recorded) by_thread_recorded[c.tid].push_back(c);
  ASSERT_EQ(by_thread_made.size(), 2u);
  ASSERT_EQ(by_thread_recorded.size(), 2u) << "calls recorded on other threads than the caller's";
  for (auto& [tid, calls] : by_thread_made) {
    // Made: in program order (a nested call after its outer call, with the
    // outer call's bounds).  Recorded: by entry time, which is that order.
    std::vector<CallRecord>& got = by_thread_recorded[tid];
    std::stable_sort(got.begin(), got.end(),
                     [](const CallRecord& a, const CallRecord& b) { return a.start < b.start; });
    ASSERT_EQ(got.size(), calls.size()) << "thread " << tid;
    for (size_t i = 0; i < calls.size(); ++i) {
      const CallRecord& want = calls[i];
      const CallRecord& have = got[i];
      EXPECT_EQ(have.Key(), want.Key()) << "thread " << tid << " call " << i;
      // Entry and return lie inside the caller's own clock readings.
      EXPECT_GE(have.start, want.start) << want.Key();
      EXPECT_LE(have.end, want.end) << want.Key();
      uint64_t duration = have.end - have.start;
      uint64_t slept = absl::StartsWith(want.name, "cuStreamSynchronize") ? kStreamSyncNs
                       : want.name == "cuEventSynchronize"                ? kEventSyncNs
                       : absl::StartsWith(want.name, "cuCtxSynchronize")  ? kCtxSyncNs
                                                                          : 0;
      EXPECT_GE(duration, slept) << want.Key();
    }
  }
}

// The BPF programs this process holds (its fds' prog_id), so that another
// test loading the same programs at the same time is not counted.
std::set<uint32_t> OwnProgramIds() {
  std::set<uint32_t> ids;
  DIR* dir = opendir("/proc/self/fdinfo");
  if (dir == nullptr) return ids;
  while (dirent* entry = readdir(dir)) {
    std::ifstream info(absl::StrCat("/proc/self/fdinfo/", entry->d_name));
    std::string key;
    uint64_t value = 0;
    while (info >> key) {
      if (key == "prog_id:" && info >> value) ids.insert(static_cast<uint32_t>(value));
    }
  }
  closedir(dir);
  return ids;
}

// Ids of this process's BPF programs named like ours ("cuda_call_entry",
// "cuda_call_retur": names are cut at 15 characters).
std::set<uint32_t> CudaProgramIds() {
  std::set<uint32_t> ids;
  for (uint32_t id : OwnProgramIds()) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    struct bpf_prog_info info {};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
        absl::StartsWith(info.name, "cuda_call_")) {
      ids.insert(id);
    }
    close(fd);
  }
  return ids;
}

// BPF links whose program is one of `progs`.
int LinksOf(const std::set<uint32_t>& progs) {
  int count = 0;
  uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    int fd = bpf_link_get_fd_by_id(id);
    if (fd < 0) continue;
    struct bpf_link_info info {};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && progs.count(info.prog_id)) count++;
    close(fd);
  }
  return count;
}

std::string ReadAt(const std::string& path, uint64_t offset, size_t size) {
  std::string out(size, '\0');
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  ssize_t n = pread(fd, out.data(), size, static_cast<off_t>(offset));
  close(fd);
  return n == static_cast<ssize_t>(size) ? out : "";
}

// Both ways of attaching: uprobe_multi links (kernels from 6.10) and one
// perf-event link per function (older kernels).
class CudaUprobesModeTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Links, CudaUprobesModeTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "UprobeMulti" : "PerfEventPerFunction";
                         });

TEST_P(CudaUprobesModeTest, RecordsEveryCallOfATrackedProcessExactly) {
  GPUOS_REQUIRE_ROOT();
  auto caller = StartCaller(FakeLibcuda(), "calls", 1);
  ASSERT_TRUE(caller);
  std::map<std::string, Symbol> symbols = Symbols(caller->lines());
  // The fixture lacks two names and gives one function two names.
  std::set<uint64_t> addresses;
  for (const auto& [name, sym] : symbols) addresses.insert(sym.address);
  ASSERT_EQ(symbols.size(), GPUOS_CUDA_FN_COUNT - 2u);
  ASSERT_EQ(addresses.size(), GPUOS_CUDA_FN_COUNT - 3u);

  std::string library = FindMappedLibrary(caller->pid(), "libcuda.so");
  struct stat found, built;
  ASSERT_EQ(stat(library.c_str(), &found), 0) << "FindMappedLibrary gave '" << library << "'";
  ASSERT_EQ(stat(FakeLibcuda().c_str(), &built), 0);
  EXPECT_EQ(found.st_ino, built.st_ino);
  EXPECT_FALSE(absl::StartsWith(library, "/proc/")) << library;  // same mount namespace

  auto session = Session::Start(GetParam());
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->bpf->Track(caller->pid()).ok());
  absl::StatusOr<int> attached = session->bpf->AttachCudaUprobes(caller->pid(), library);
  ASSERT_TRUE(attached.ok()) << attached.status();
  EXPECT_EQ(*attached, static_cast<int>(addresses.size()));

  RunRound(caller.get(), session.get(), 0);
  ASSERT_EQ(caller->Wait(20), 0);
  session->Drain();

  std::vector<CallRecord> made = CallerCalls(caller->lines(), RecordedNames(symbols));
  ASSERT_GT(made.size(), 200u);
  ExpectRecordedExactly(made, session->Recorded(caller->pid()));
  for (const v1::Event& e : session->events) {
    EXPECT_TRUE(e.cuda_api().driver());
    EXPECT_TRUE(e.cuda_api().from_uprobe());
    EXPECT_EQ(e.cuda_api().cbid(), 0u);
    EXPECT_EQ(e.cuda_api().correlation_id(), 0u);
  }
  EXPECT_EQ(session->undecodable, 0);
  EXPECT_EQ(session->Drops(), 0u);
}

TEST(CudaUprobesTest, OnlyAProcessBothProbedAndTrackedIsRecorded) {
  GPUOS_REQUIRE_ROOT();
  // a: probed and tracked; b: tracked, not probed; c: probed, not tracked.
  auto a = StartCaller(FakeLibcuda(), "calls", 1);
  auto b = StartCaller(FakeLibcuda(), "calls", 1);
  auto c = StartCaller(FakeLibcuda(), "calls", 1);
  ASSERT_TRUE(a && b && c);
  auto session = Session::Start();
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->bpf->Track(a->pid()).ok());
  ASSERT_TRUE(session->bpf->Track(b->pid()).ok());
  for (Caller* probed : {a.get(), c.get()}) {
    absl::StatusOr<int> n = session->bpf->AttachCudaUprobes(probed->pid(), FakeLibcuda());
    ASSERT_TRUE(n.ok()) << n.status();
  }
  for (Caller* caller : {a.get(), b.get(), c.get()}) {
    RunRound(caller, session.get(), 0);
    ASSERT_EQ(caller->Wait(20), 0);
  }
  session->Drain();
  size_t made_by_a = CallerCalls(a->lines(), RecordedNames(Symbols(a->lines()))).size();
  EXPECT_EQ(CountPid(session->events, a->pid()), made_by_a);
  EXPECT_EQ(CountPid(session->events, b->pid()), 0u);
  EXPECT_EQ(CountPid(session->events, c->pid()), 0u);
  EXPECT_EQ(session->events.size(), made_by_a);
}

TEST_P(CudaUprobesModeTest, DestroyingTheSessionRemovesEveryProbe) {
  GPUOS_REQUIRE_ROOT();
  auto caller = StartCaller(FakeLibcuda(), "calls", 2);
  ASSERT_TRUE(caller);
  std::map<std::string, Symbol> symbols = Symbols(caller->lines());
  const std::string mem = absl::StrCat("/proc/", caller->pid(), "/mem");
  // The first bytes of each function in the process, before, while and
  // after probing; for this library the text's file offsets are its
  // addresses, so the file holds the originals.
  auto code = [&](const Symbol& sym) { return ReadAt(mem, sym.address, 8); };
  for (const auto& [name, sym] : symbols) {
    ASSERT_EQ(code(sym), ReadAt(FakeLibcuda(), sym.vaddr, 8)) << name;
  }
  std::set<uint32_t> before = CudaProgramIds();

  auto session = Session::Start(GetParam());
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->bpf->Track(caller->pid()).ok());
  absl::StatusOr<int> attached = session->bpf->AttachCudaUprobes(caller->pid(), FakeLibcuda());
  ASSERT_TRUE(attached.ok()) << attached.status();
  std::set<uint32_t> ours;
  for (uint32_t id : CudaProgramIds()) {
    if (!before.count(id)) ours.insert(id);
  }
  EXPECT_EQ(ours.size(), 2u);
  // Entry and return: one uprobe_multi link each, or one link per function.
  EXPECT_EQ(LinksOf(ours), GetParam() ? 2 : 2 * *attached);
  for (const auto& [name, sym] : symbols) {
    EXPECT_NE(code(sym), ReadAt(FakeLibcuda(), sym.vaddr, 8)) << name << " has no breakpoint";
  }
  RunRound(caller.get(), session.get(), 0);
  session->Drain();
  EXPECT_FALSE(session->events.empty());

  double destroy_start = rt::MonotonicSeconds();
  session.reset();
  printf("session with %d probed functions destroyed in %.2f s\n", *attached,
         rt::MonotonicSeconds() - destroy_start);
  for (const auto& [name, sym] : symbols) {
    EXPECT_EQ(code(sym), ReadAt(FakeLibcuda(), sym.vaddr, 8)) << name << " still probed";
  }
  for (uint32_t id : ours) {
    int fd = bpf_prog_get_fd_by_id(id);
    EXPECT_LT(fd, 0) << "BPF program " << id << " still loaded";
    if (fd >= 0) close(fd);
  }
  EXPECT_EQ(LinksOf(ours), 0);
  // libbpf falls back to tracefs uprobe_events on kernels without the
  // uprobe PMU; none of ours may be left there either.
  std::optional<std::string> uprobe_events = rt::ReadFile("/sys/kernel/tracing/uprobe_events");
  if (uprobe_events) {
    EXPECT_FALSE(absl::StrContains(*uprobe_events, "libcuda")) << *uprobe_events;
  }
  // The process runs on unharmed, unrecorded.
  RunRound(caller.get(), nullptr, 1);
  EXPECT_EQ(caller->Wait(20), 0);
}

TEST(CudaUprobesTest, ErrorsSayWhatIsWrong) {
  GPUOS_REQUIRE_ROOT();
  auto caller = StartCaller(FakeLibcuda(), "calls", 1);
  ASSERT_TRUE(caller);
  auto session = Session::Start();
  ASSERT_TRUE(session);
  rt::TempDir dir;
  ASSERT_TRUE(rt::WriteFile(dir.File("not_elf.so"), "hello"));

  // An ELF file without the driver's functions: the caller program itself.
  absl::StatusOr<int> none =
      session->bpf->AttachCudaUprobes(caller->pid(), rt::WorkloadPath("uprobe_cuda_caller"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "exports none")) << none.status();

  absl::StatusOr<int> not_elf = session->bpf->AttachCudaUprobes(caller->pid(), dir.File("not_elf.so"));
  EXPECT_EQ(not_elf.status().code(), absl::StatusCode::kInvalidArgument) << not_elf.status();
  absl::StatusOr<int> missing = session->bpf->AttachCudaUprobes(caller->pid(), dir.File("nope.so"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(session->bpf->AttachCudaUprobes(0, FakeLibcuda()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A process that has ended.
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_TRUE(rt::WaitForPid(gone, 10));
  absl::StatusOr<int> dead = session->bpf->AttachCudaUprobes(gone, FakeLibcuda());
  EXPECT_EQ(dead.status().code(), absl::StatusCode::kNotFound) << dead.status();

  ASSERT_TRUE(session->bpf->AttachCudaUprobes(caller->pid(), FakeLibcuda()).ok());
  EXPECT_EQ(session->bpf->AttachCudaUprobes(caller->pid(), FakeLibcuda()).status().code(),
            absl::StatusCode::kAlreadyExists);

  // No libcuda in this test process; no such process at all.
  EXPECT_EQ(FindMappedLibrary(getpid(), "libcuda.so"), "");
  EXPECT_EQ(FindMappedLibrary(999999999, "libcuda.so"), "");
  // A prefix is matched against the file name, not the path.
  EXPECT_EQ(FindMappedLibrary(caller->pid(), "fake_cuda"), "");
}

// Probes the caller through `found` (the library as FindMappedLibrary gave
// it), runs one round, and checks every call was recorded exactly.
void ProbeOneRoundThrough(Caller* caller, const std::string& found) {
  auto session = Session::Start();
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->bpf->Track(caller->pid()).ok());
  absl::StatusOr<int> attached = session->bpf->AttachCudaUprobes(caller->pid(), found);
  ASSERT_TRUE(attached.ok()) << attached.status();
  RunRound(caller, session.get(), 0);
  ASSERT_EQ(caller->Wait(20), 0);
  session->Drain();
  std::vector<CallRecord> made = CallerCalls(caller->lines(), RecordedNames(Symbols(caller->lines())));
  ExpectRecordedExactly(made, session->Recorded(caller->pid()));
}

// A container's view: the process sees, at the path in its maps, a file
// that this namespace does not have there (here a different ELF file holds
// that path), so only /proc/PID/root reaches the library it runs.
TEST(CudaUprobesTest, FindsTheLibraryInsideAnotherMountNamespace) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string lib = dir.File("libcuda.so.1");
  // Ours: an ELF file without the driver functions.
  ASSERT_TRUE(rt::WriteFile(lib, *rt::ReadFile(rt::WorkloadPath("uprobe_cuda_caller"))));
  std::string script = absl::StrCat("mount -t tmpfs gpuos-test ", dir.path(), " && cp ",
                                    FakeLibcuda(), " ", lib, " && exec ",
                                    rt::WorkloadPath("uprobe_cuda_caller"), " ", lib,
                                    " calls 1");
  auto caller = std::make_unique<Caller>(std::vector<std::string>{
      "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script});
  ASSERT_FALSE(caller->ReadUntil("ready ", 20).empty()) << "no caller in a mount namespace";

  std::string found = FindMappedLibrary(caller->pid(), "libcuda.so");
  EXPECT_EQ(found, absl::StrCat("/proc/", caller->pid(), "/root", lib));
  ProbeOneRoundThrough(caller.get(), found);
}

// A driver upgraded under a running job: the file the process mapped is
// gone from the filesystem, reachable only through /proc/PID/map_files.
TEST(CudaUprobesTest, FollowsALibraryDeletedSinceItWasLoaded) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string lib = dir.File("libcuda.so.1");
  ASSERT_TRUE(rt::WriteFile(lib, *rt::ReadFile(FakeLibcuda())));
  auto caller = StartCaller(lib, "calls", 1);
  ASSERT_TRUE(caller);
  ASSERT_EQ(unlink(lib.c_str()), 0);

  std::string found = FindMappedLibrary(caller->pid(), "libcuda.so");
  EXPECT_TRUE(absl::StartsWith(found, absl::StrCat("/proc/", caller->pid(), "/map_files/")))
      << found;
  ProbeOneRoundThrough(caller.get(), found);
}

// Not a timed test: prints what a probed call costs the traced thread
// (uprobe + uretprobe), and checks that every call was accounted for.
// GPUOS_UPROBE_BENCH_LIBCUDA=/path/to/libcuda.so.1 measures with a real
// driver instead (its cuEventQuery before cuInit: an immediate error).
TEST(CudaUprobesTest, CostPerProbedCall) {
  GPUOS_REQUIRE_ROOT();
  constexpr long kIters = 200000;
  const char* real = getenv("GPUOS_UPROBE_BENCH_LIBCUDA");
  const std::string library = real && *real ? real : FakeLibcuda();
  auto caller = StartCaller(library, "bench", kIters);
  ASSERT_TRUE(caller);
  auto session = Session::Start(true, 64ull << 20);
  ASSERT_TRUE(session);
  double ns[3] = {0, 0, 0};
  auto round = [&](int r) {
    caller->Go();
    std::string line = caller->ReadUntil(absl::StrCat("bench ", r, " "), 120,
                                         [&] { session->Drain(); });
    ASSERT_FALSE(line.empty()) << "bench round " << r;
    ASSERT_TRUE(absl::SimpleAtod(Fields(line)["ns_per_call"], &ns[r])) << line;
  };
  round(0);  // no probes
  absl::StatusOr<int> attached = session->bpf->AttachCudaUprobes(caller->pid(), library);
  ASSERT_TRUE(attached.ok()) << attached.status();
  printf("%s: %d functions probed\n", library.c_str(), *attached);
  round(1);  // probed, process not tracked: the probes return at once
  ASSERT_TRUE(session->bpf->Track(caller->pid()).ok());
  round(2);  // probed and tracked: one record per call
  ASSERT_EQ(caller->Wait(20), 0);
  session->Drain();
  EXPECT_EQ(CountPid(session->events, caller->pid()) + session->Drops(), 3u * kIters);
  printf("uprobe cost per probed call (uprobe + uretprobe, cuEventQuery of %s): "
         "%.0f ns recorded, %.0f ns untracked (unprobed call %.1f ns); %zu recorded, %lu dropped\n",
         library.c_str(), ns[2] - ns[0], ns[1] - ns[0], ns[0],
         CountPid(session->events, caller->pid()),
         static_cast<unsigned long>(session->Drops()));
  RecordProperty("probed_call_ns", static_cast<int>(ns[2] - ns[0]));
  RecordProperty("probed_untracked_call_ns", static_cast<int>(ns[1] - ns[0]));
}

}  // namespace
}  // namespace gpuos
