// Tests of `gpuos-trace export`: .gpuos traces written with TraceWriter are
// exported, and the output is decoded with the generated classes of
// proto/perfetto/perfetto_trace.proto (as perfetto.protos.Trace) and held to
// the rules trace_processor relies on (PerfettoTraceChecker) and to what the
// issue asks to see: which slice lands on which track with which
// annotations, flows, counters, late CUDA records in order, the Chrome JSON.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "export/timeline/kinds/block_io_kind.h"
#include "export/timeline/kinds/cuda_kinds.h"
#include "export/perfetto/perfetto_export.h"
#include "support/perfetto_trace_check.h"
#include "gtest/gtest.h"
#include "perfetto_trace.pb.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

namespace pp = ::perfetto::protos;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 1'000 * kMs;  // one second after boot

// ---- Building .gpuos traces ------------------------------------------------

v1::TraceHeader MakeHeader() {
  v1::TraceHeader header;
  header.set_tracer_version("test");
  header.set_root_pid(100);
  header.add_command_line("python3");
  header.add_command_line("train.py");
  (*header.mutable_syscall_names())[9] = "mmap";
  (*header.mutable_syscall_names())[202] = "futex";
  return header;
}

v1::Event At(uint64_t ts, uint32_t pid, uint32_t tid) {
  v1::Event event;
  event.set_ts_ns(ts);
  event.set_pid(pid);
  event.set_tid(tid);
  return event;
}

v1::Event ProcessStart(uint64_t ts, uint32_t pid, const std::string& comm) {
  v1::Event event = At(ts, pid, pid);
  event.mutable_process_start()->set_comm(comm);
  event.mutable_process_start()->set_is_root(pid == 100);
  return event;
}

v1::Event ThreadStart(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  v1::Event event = At(ts, pid, tid);
  event.mutable_thread_start()->set_comm(comm);
  return event;
}

v1::Event OffCpu(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur, v1::OffCpuCause cause,
                 int32_t syscall_nr) {
  v1::Event event = At(ts, pid, tid);
  event.mutable_off_cpu()->set_duration_ns(dur);
  event.mutable_off_cpu()->set_cause(cause);
  event.mutable_off_cpu()->set_syscall_nr(syscall_nr);
  event.mutable_off_cpu()->set_voluntary(true);
  return event;
}

v1::Event Mmap(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur, uint64_t length) {
  v1::Event event = At(ts, pid, tid);
  event.mutable_mmap()->set_duration_ns(dur);
  event.mutable_mmap()->set_length(length);
  event.mutable_mmap()->set_result(0x7f0000000000);
  event.mutable_mmap()->set_fd(-1);
  return event;
}

v1::Event Munmap(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur) {
  v1::Event event = At(ts, pid, tid);
  event.mutable_munmap()->set_duration_ns(dur);
  event.mutable_munmap()->set_length(4096);
  return event;
}

v1::Event FutexWait(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur) {
  v1::Event event = At(ts, pid, tid);
  event.mutable_futex_wait()->set_duration_ns(dur);
  event.mutable_futex_wait()->set_uaddr(0x1000);
  return event;
}

v1::Event Api(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur, const std::string& name,
              uint32_t correlation_id) {
  v1::Event event = At(ts, pid, tid);
  event.mutable_cuda_api()->set_duration_ns(dur);
  event.mutable_cuda_api()->set_name(name);
  event.mutable_cuda_api()->set_correlation_id(correlation_id);
  return event;
}

v1::Event Kernel(uint64_t ts, uint32_t pid, uint64_t dur, const std::string& name,
                 uint32_t correlation_id, uint32_t stream = 7) {
  v1::Event event = At(ts, pid, 0);
  v1::GpuKernel* kernel = event.mutable_gpu_kernel();
  kernel->set_duration_ns(dur);
  kernel->set_name(name);
  kernel->set_device(0);
  kernel->set_context(1);
  kernel->set_stream(stream);
  kernel->set_correlation_id(correlation_id);
  kernel->set_grid_x(128);
  kernel->set_grid_y(2);
  kernel->set_grid_z(1);
  kernel->set_block_x(256);
  kernel->set_block_y(1);
  kernel->set_block_z(1);
  kernel->set_registers_per_thread(32);
  return event;
}

v1::Event Memcpy(uint64_t ts, uint32_t pid, uint64_t dur, uint64_t bytes,
                 uint32_t correlation_id) {
  v1::Event event = At(ts, pid, 0);
  v1::GpuMemcpy* copy = event.mutable_gpu_memcpy();
  copy->set_duration_ns(dur);
  copy->set_bytes(bytes);
  copy->set_direction(v1::MEMCPY_HTOD);
  copy->set_src_kind(v1::MEMORY_PINNED);
  copy->set_dst_kind(v1::MEMORY_DEVICE);
  copy->set_async(true);
  copy->set_device(0);
  copy->set_context(1);
  copy->set_stream(7);
  copy->set_correlation_id(correlation_id);
  return event;
}

v1::Event Memset(uint64_t ts, uint32_t pid, uint64_t dur, uint32_t correlation_id) {
  v1::Event event = At(ts, pid, 0);
  v1::GpuMemset* set = event.mutable_gpu_memset();
  set->set_duration_ns(dur);
  set->set_bytes(1 << 16);
  set->set_memory_kind(v1::MEMORY_DEVICE);
  set->set_device(0);
  set->set_context(1);
  set->set_stream(7);
  set->set_correlation_id(correlation_id);
  return event;
}

v1::Event Nvtx(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur, const std::string& name,
               bool start_end = false, uint32_t end_tid = 0) {
  v1::Event event = At(ts, pid, tid);
  v1::NvtxRange* range = event.mutable_nvtx_range();
  range->set_duration_ns(dur);
  range->set_name(name);
  range->set_kind(start_end ? v1::NvtxRange::START_END : v1::NvtxRange::PUSH_POP);
  range->set_end_tid(end_tid);
  return event;
}

v1::Event PageFaults(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t last, uint32_t count) {
  v1::Event event = At(ts, pid, tid);
  event.mutable_page_faults()->set_last_ns(last);
  event.mutable_page_faults()->set_count(count);
  return event;
}

v1::Event BlockIo(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur, const std::string& dev_name,
                  const std::string& rwbs, uint32_t bytes, int32_t error = 0) {
  v1::Event event = At(ts, pid, tid);
  v1::BlockIo* io = event.mutable_block_io();
  io->set_duration_ns(dur);
  io->set_dev((254u << 20) | 16);
  io->set_dev_name(dev_name);
  io->set_sector(2048);
  io->set_bytes(bytes);
  io->set_rwbs(rwbs);
  io->set_error(error);
  return event;
}

// ---- Decoding the output ---------------------------------------------------

struct DecodedTrack {
  uint64_t uuid = 0;
  uint64_t parent = 0;
  std::string name;
  int32_t pid = 0;
  int32_t tid = 0;
  bool process = false;
  bool thread = false;
  bool counter = false;
  std::vector<std::string> cmdline;
};

struct DecodedEvent {
  uint64_t ts = 0;
  uint32_t sequence = 0;
  pp::TrackEvent::Type type = pp::TrackEvent::TYPE_UNSPECIFIED;
  uint64_t track = 0;
  std::string name;
  std::string category;
  std::map<std::string, std::string> args;  // values as text
  std::vector<uint64_t> flow_ids;
  std::vector<uint64_t> terminating_flow_ids;
  double counter = 0;
};

// Decodes with the generated classes and resolves interned names by hand,
// independently of PerfettoTraceChecker.
struct Decoded {
  std::map<uint64_t, DecodedTrack> tracks;
  std::vector<DecodedEvent> events;

  const DecodedTrack* TrackNamed(const std::string& name) const {
    for (const auto& [uuid, track] : tracks) {
      if (track.name == name) return &track;
    }
    return nullptr;
  }
  std::vector<const DecodedEvent*> Named(const std::string& name) const {
    std::vector<const DecodedEvent*> found;
    for (const DecodedEvent& event : events) {
      if (event.name == name && event.type != pp::TrackEvent::TYPE_SLICE_END) found.push_back(&event);
    }
    return found;
  }
  std::vector<const DecodedEvent*> OnTrack(uint64_t uuid, pp::TrackEvent::Type type) const {
    std::vector<const DecodedEvent*> found;
    for (const DecodedEvent& event : events) {
      if (event.track == uuid && event.type == type) found.push_back(&event);
    }
    return found;
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Decoded Decode(const pp::Trace& trace) {
  Decoded decoded;
  std::map<uint32_t, std::map<uint64_t, std::string>> names, categories, arg_names;
  for (const pp::TracePacket& packet : trace.packet()) {
    const uint32_t seq = packet.trusted_packet_sequence_id();
    if (packet.sequence_flags() & pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) {
      names[seq].clear();
      categories[seq].clear();
      arg_names[seq].clear();
    }
    for (const auto& e : packet.interned_data().event_names()) names[seq][e.iid()] = e.name();
    for (const auto& e : packet.interned_data().event_categories()) {
      categories[seq][e.iid()] = e.name();
    }
    for (const auto& e : packet.interned_data().debug_annotation_names()) {
      arg_names[seq][e.iid()] = e.name();
    }
    if (packet.has_track_descriptor()) {
      const pp::TrackDescriptor& d = packet.track_descriptor();
      DecodedTrack track;
      track.uuid = d.uuid();
      track.parent = d.parent_uuid();
      track.name = d.name();
      track.process = d.has_process();
      track.thread = d.has_thread();
      track.counter = d.has_counter();
      if (d.has_process()) {
        track.pid = d.process().pid();
        track.cmdline.assign(d.process().cmdline().begin(), d.process().cmdline().end());
      }
      if (d.has_thread()) {
        track.pid = d.thread().pid();
        track.tid = d.thread().tid();
      }
      decoded.tracks[track.uuid] = track;
    }
    if (packet.has_track_event()) {
      const pp::TrackEvent& e = packet.track_event();
      DecodedEvent event;
      event.ts = packet.timestamp();
      event.sequence = seq;
      event.type = e.type();
      event.track = e.track_uuid();
      if (e.has_name_iid()) event.name = names[seq][e.name_iid()];
      for (uint64_t iid : e.category_iids()) event.category = categories[seq][iid];
      for (const pp::DebugAnnotation& a : e.debug_annotations()) {
        std::string value;
        if (a.has_string_value()) value = a.string_value();
        if (a.has_int_value()) value = absl::StrCat(a.int_value());
        if (a.has_uint_value()) value = absl::StrCat(a.uint_value());
        if (a.has_pointer_value()) value = absl::StrCat(a.pointer_value());
        if (a.has_bool_value()) value = a.bool_value() ? "true" : "false";
        event.args[arg_names[seq][a.name_iid()]] = value;
      }
      event.flow_ids.assign(e.flow_ids().begin(), e.flow_ids().end());
      event.terminating_flow_ids.assign(e.terminating_flow_ids().begin(),
                                        e.terminating_flow_ids().end());
      event.counter = e.double_counter_value();
      decoded.events.push_back(event);
    }
  }
  return decoded;
}

class PerfettoExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/perfetto_export_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << strerror(errno);
    dir_ = tmpl;
    options_.temp_dir = dir_;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  void WriteTrace(const std::string& path, const std::vector<v1::Event>& events) {
    auto writer = TraceWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->WriteHeader(MakeHeader()).ok());
    for (const v1::Event& event : events) ASSERT_TRUE((*writer)->Append(event).ok());
    v1::TraceTrailer trailer;
    ASSERT_TRUE((*writer)->WriteTrailer(trailer).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }

  // Exports `events`, checks the result against the trace rules, decodes it.
  Decoded ExportAndCheck(const std::vector<v1::Event>& events, ExportSummary* summary = nullptr) {
    WriteTrace(Path("in.gpuos"), events);
    absl::StatusOr<ExportSummary> result = ExportTrace(Path("in.gpuos"), Path("out.pftrace"), options_);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    EXPECT_TRUE(result->input_status.ok()) << result->input_status;
    if (summary != nullptr) *summary = *result;

    pp::Trace trace;
    EXPECT_TRUE(trace.ParseFromString(ReadFile(Path("out.pftrace"))));
    PerfettoTraceChecker checker;
    for (const pp::TracePacket& packet : trace.packet()) checker.Add(packet);
    check_ = checker.Finish();
    EXPECT_TRUE(check_.ok()) << ::testing::PrintToString(check_.violations);
    // The streaming reader agrees with the whole-file parse.
    absl::StatusOr<PerfettoTraceCheck> streamed = CheckPerfettoTraceFile(Path("out.pftrace"));
    EXPECT_TRUE(streamed.ok()) << streamed.status();
    if (streamed.ok()) {
      EXPECT_EQ(streamed->packets, static_cast<uint64_t>(trace.packet_size()));
      EXPECT_EQ(streamed->violation_count, check_.violation_count);
    }
    return Decode(trace);
  }

  std::string dir_;
  ExportOptions options_;
  PerfettoTraceCheck check_;
};

// One process with two threads doing everything the exporter draws.
std::vector<v1::Event> TrainingLikeTrace() {
  const uint64_t t = kT0;
  std::vector<v1::Event> events = {
      ProcessStart(t, 100, "python3"),
      ThreadStart(t + 10, 100, 101, "pt_worker"),
      // An mmap that blocks: the off-CPU interval lies inside it, and a
      // second off-CPU interval straddles its end.
      Mmap(t + 1 * kMs, 100, 100, 200'000, 1 << 20),
      Munmap(t + 1'500'000, 100, 100, 50'000),
      FutexWait(t + 1 * kMs, 100, 101, 3 * kMs),
      // NVTX push/pop around the launches on the main thread.
      Nvtx(t + 2 * kMs, 100, 100, 3 * kMs, "forward"),
      Api(t + 2'100'000, 100, 100, 10'000, "cudaLaunchKernel_v7000", 7),
      Api(t + 2'300'000, 100, 100, 10'000, "cudaMemcpyAsync_v3020", 8),
      Api(t + 2'400'000, 100, 100, 10'000, "cudaMemsetAsync_v3020", 9),
      Api(t + 2'500'000, 100, 100, 10'000, "cudaMalloc_v3020", 10),  // no GPU work
      // An NVTX start/end range that ends on the other thread.
      Nvtx(t + 1 * kMs, 100, 100, 8 * kMs, "epoch", true, 101),
      PageFaults(t + 1 * kMs, 100, 100, t + 2 * kMs, 50),
  };
  // Written when they end, so after later-starting events.
  events.push_back(OffCpu(t + 1'050'000, 100, 100, 100'000, v1::OFF_CPU_CAUSE_SYSCALL, 9));
  events.push_back(OffCpu(t + 1'150'000, 100, 100, 100'000, v1::OFF_CPU_CAUSE_PREEMPTED, -1));
  events.push_back(OffCpu(t + 1'100'000, 100, 101, 2 * kMs, v1::OFF_CPU_CAUSE_FUTEX, 202));
  // The tracer's own accounting has no process and draws nothing.
  v1::Event stats = At(t + 5 * kMs, 0, 0);
  stats.mutable_tracer_stats()->set_events_written(10);
  events.push_back(stats);
  // CUDA activity arrives last, as the shim flushes its buffers.
  events.push_back(Kernel(t + 2'200'000, 100, 1 * kMs, "void gemm<float>(float*)", 7));
  events.push_back(Memcpy(t + 3'300'000, 100, 200'000, 1 << 20, 8));
  events.push_back(Memset(t + 3'600'000, 100, 100'000, 9));
  events.push_back(Kernel(t + 4 * kMs, 100, 50'000, "orphan_kernel", 99));  // no API call
  return events;
}

TEST_F(PerfettoExportTest, TrainingTraceIsValidAndComplete) {
  options_.steps = {{kT0 + 2 * kMs, kT0 + 5 * kMs, 1, 0}, {kT0 + 5 * kMs, kT0 + 9 * kMs, 2, 0}};
  ExportSummary summary;
  Decoded out = ExportAndCheck(TrainingLikeTrace(), &summary);

  // Process and thread descriptors carry pid, tid and names.
  const DecodedTrack* process = out.TrackNamed("python3");
  ASSERT_NE(process, nullptr);
  EXPECT_TRUE(process->process);
  EXPECT_EQ(process->pid, 100);
  EXPECT_EQ(process->cmdline, (std::vector<std::string>{"python3", "train.py"}));
  const DecodedTrack* worker = out.TrackNamed("pt_worker");
  ASSERT_NE(worker, nullptr);
  EXPECT_TRUE(worker->thread);
  EXPECT_EQ(worker->pid, 100);
  EXPECT_EQ(worker->tid, 101);
  EXPECT_EQ(check_.process_tracks, 1u);
  EXPECT_EQ(check_.thread_tracks, 2u);

  // Searchable names, each on the track meant for it.
  auto only = [&](const std::string& name) -> const DecodedEvent& {
    auto found = out.Named(name);
    EXPECT_EQ(found.size(), 1u) << name;
    static const DecodedEvent kNone;
    return found.empty() ? kNone : *found[0];
  };
  const DecodedTrack* os = out.TrackNamed("100 OS");
  const DecodedTrack* off_cpu = out.TrackNamed("100 off-CPU");
  ASSERT_NE(os, nullptr);
  ASSERT_NE(off_cpu, nullptr);
  const DecodedTrack* main_thread = nullptr;
  for (const auto& [uuid, track] : out.tracks) {
    if (track.thread && track.tid == 100) main_thread = &track;
  }
  ASSERT_NE(main_thread, nullptr);
  EXPECT_EQ(os->parent, main_thread->uuid);
  EXPECT_EQ(off_cpu->parent, main_thread->uuid);
  EXPECT_EQ(only("mmap").track, os->uuid);
  EXPECT_EQ(only("mmap").args.at("length"), "1048576");
  EXPECT_EQ(only("munmap").track, os->uuid);
  EXPECT_EQ(only("futex wait").track, out.TrackNamed("101 OS")->uuid);
  const DecodedEvent& blocked = only("off-CPU (syscall)");
  EXPECT_EQ(blocked.track, off_cpu->uuid);
  EXPECT_EQ(blocked.args.at("syscall"), "mmap");
  EXPECT_EQ(only("off-CPU (preempted)").track, off_cpu->uuid);
  EXPECT_EQ(only("off-CPU (futex)").args.at("syscall"), "futex");

  // CUDA API calls without the _vNNNN suffix, NVTX push/pop on the thread.
  EXPECT_EQ(only("cudaLaunchKernel").track, main_thread->uuid);
  EXPECT_EQ(only("forward").track, main_thread->uuid);
  EXPECT_EQ(only("forward").category, "nvtx");
  EXPECT_TRUE(out.Named("cudaLaunchKernel_v7000").empty());
  // NVTX start/end on the process's async track.
  const DecodedTrack* nvtx = out.TrackNamed("NVTX ranges");
  ASSERT_NE(nvtx, nullptr);
  EXPECT_EQ(nvtx->parent, process->uuid);
  EXPECT_EQ(only("epoch").track, nvtx->uuid);
  EXPECT_EQ(only("epoch").args.at("end_tid"), "101");

  // GPU work on its stream's track, with its annotations.
  const DecodedTrack* stream = out.TrackNamed("GPU 0 stream 7 (context 1)");
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(stream->parent, process->uuid);
  const DecodedEvent& kernel = only("void gemm<float>(float*)");
  EXPECT_EQ(kernel.track, stream->uuid);
  EXPECT_EQ(kernel.category, "gpu");
  EXPECT_EQ(kernel.args.at("grid"), "128,2,1");
  EXPECT_EQ(kernel.args.at("block"), "256,1,1");
  EXPECT_EQ(kernel.args.at("registers_per_thread"), "32");
  EXPECT_EQ(kernel.args.at("correlation_id"), "7");
  const DecodedEvent& copy = only("Memcpy HtoD");
  EXPECT_EQ(copy.track, stream->uuid);
  EXPECT_EQ(copy.args.at("bytes"), "1048576");
  EXPECT_EQ(copy.args.at("direction"), "HtoD");
  EXPECT_EQ(copy.args.at("src_kind"), "pinned");
  EXPECT_EQ(copy.args.at("dst_kind"), "device");
  EXPECT_EQ(only("Memset").track, stream->uuid);

  // Flows: launch, copy and memset to their GPU work; none for cudaMalloc
  // (no GPU work) or the orphan kernel (no call).
  EXPECT_EQ(check_.flows, 3u);
  EXPECT_EQ(summary.flows, 3u);
  ASSERT_EQ(only("cudaLaunchKernel").flow_ids.size(), 1u);
  EXPECT_EQ(kernel.terminating_flow_ids, only("cudaLaunchKernel").flow_ids);
  EXPECT_EQ(copy.terminating_flow_ids, only("cudaMemcpyAsync").flow_ids);
  EXPECT_TRUE(only("cudaMalloc").flow_ids.empty());
  EXPECT_TRUE(only("orphan_kernel").terminating_flow_ids.empty());
  EXPECT_TRUE(only("orphan_kernel").flow_ids.empty());

  // Steps on their own track.
  const DecodedTrack* steps = out.TrackNamed("steps");
  ASSERT_NE(steps, nullptr);
  EXPECT_EQ(only("step 1").track, steps->uuid);
  EXPECT_EQ(only("step 2").args.at("index"), "2");

  // Counters over 10 ms buckets: the trace's first bucket is [1000, 1010) ms.
  auto values = [&](const std::string& name) {
    std::vector<std::pair<uint64_t, double>> v;
    const DecodedTrack* track = out.TrackNamed(name);
    EXPECT_NE(track, nullptr) << name;
    if (track == nullptr) return v;
    EXPECT_TRUE(track->counter);
    for (const DecodedEvent* e : out.OnTrack(track->uuid, pp::TrackEvent::TYPE_COUNTER)) {
      v.emplace_back(e->ts, e->counter);
    }
    return v;
  };
  // Busy: kernels 1 ms + 0.05 ms, copy 0.2 ms, memset 0.1 ms of 10 ms.
  auto busy = values("GPU 0 busy %");
  ASSERT_GE(busy.size(), 2u);
  EXPECT_EQ(busy[0].first, kT0);
  EXPECT_NEAR(busy[0].second, 13.5, 1e-9);
  EXPECT_EQ(busy.back().second, 0);
  // 50 faults in one 10 ms bucket: 5000/s; 3 context switches: 300/s.
  auto faults = values("page faults/s");
  ASSERT_FALSE(faults.empty());
  EXPECT_NEAR(faults[0].second, 5000, 1e-6);
  auto switches = values("context switches/s");
  ASSERT_FALSE(switches.empty());
  EXPECT_NEAR(switches[0].second, 300, 1e-6);
  for (const auto& [name, count] : check_.counter_values_by_track) EXPECT_GT(count, 0u) << name;
}

TEST_F(PerfettoExportTest, EverySequenceStartsClearedAndInternsWhatItUses) {
  Decoded out = ExportAndCheck(TrainingLikeTrace());
  pp::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(ReadFile(Path("out.pftrace"))));
  std::set<uint32_t> seen;
  for (const pp::TracePacket& packet : trace.packet()) {
    const uint32_t seq = packet.trusted_packet_sequence_id();
    if (seen.insert(seq).second) {
      EXPECT_TRUE(packet.sequence_flags() & pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    }
    if (packet.track_event().has_name_iid()) {
      EXPECT_TRUE(packet.sequence_flags() & pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    }
    // Every name is interned: the non-interned field is never used.
    EXPECT_FALSE(packet.track_event().has_name());
  }
  EXPECT_EQ(seen, (std::set<uint32_t>{1, 2}));
  // Each name is sent once per sequence though used many times.
  std::map<std::string, int> sent;
  for (const pp::TracePacket& packet : trace.packet()) {
    for (const auto& e : packet.interned_data().event_names()) ++sent[e.name()];
  }
  for (const auto& [name, count] : sent) EXPECT_EQ(count, 1) << name;
  // Descriptors come first: no event before the last non-lane descriptor.
  size_t last_descriptor = 0, first_event = trace.packet_size();
  for (int i = 0; i < trace.packet_size(); ++i) {
    if (trace.packet(i).has_track_descriptor()) last_descriptor = i;
    if (trace.packet(i).has_track_event() && first_event == static_cast<size_t>(trace.packet_size())) {
      first_event = i;
    }
  }
  EXPECT_LT(last_descriptor, first_event);
}

TEST_F(PerfettoExportTest, SecondsLateCudaRecordsComeOutInOrder) {
  // 3 s of OS activity first, then the CUDA records for that time in a
  // shuffled order, as a shim flushing late buffers would write them; a
  // tiny sort buffer forces the external merge through many runs.
  std::vector<v1::Event> events = {ProcessStart(kT0, 100, "python3")};
  std::vector<v1::Event> cuda;
  for (uint32_t i = 0; i < 3000; ++i) {
    const uint64_t t = kT0 + i * kMs;
    events.push_back(FutexWait(t, 100, 100, 300'000));
    cuda.push_back(Api(t + 400'000, 100, 100, 20'000, "cudaLaunchKernel_v7000", i + 1));
    cuda.push_back(Kernel(t + 500'000, 100, 400'000, "k", i + 1, /*stream=*/7 + i % 3));
  }
  std::mt19937 rng(42);
  std::shuffle(cuda.begin(), cuda.end(), rng);
  events.insert(events.end(), cuda.begin(), cuda.end());
  options_.sort_buffer_bytes = 500 * sizeof(TimelineRecord);

  ExportSummary summary;
  Decoded out = ExportAndCheck(events, &summary);
  EXPECT_GT(summary.sort_runs_spilled, 10u);
  EXPECT_EQ(check_.flows, 3000u);
  EXPECT_EQ(out.Named("k").size(), 3000u);
  EXPECT_EQ(out.Named("cudaLaunchKernel").size(), 3000u);
  // Every track in time order, each kernel after its launch.
  std::map<uint64_t, uint64_t> last_ts;
  for (const DecodedEvent& event : out.events) {
    EXPECT_GE(event.ts, last_ts[event.track]);
    last_ts[event.track] = event.ts;
  }
  for (const char* name : {"GPU 0 stream 7 (context 1)", "GPU 0 stream 8 (context 1)",
                                  "GPU 0 stream 9 (context 1)"}) {
    const DecodedTrack* stream = out.TrackNamed(name);
    ASSERT_NE(stream, nullptr) << name;
    EXPECT_EQ(out.OnTrack(stream->uuid, pp::TrackEvent::TYPE_SLICE_BEGIN).size(), 1000u);
  }
  EXPECT_EQ(summary.overflow_lanes, 0u);

  // The merge is deterministic: a single in-memory sort writes the same bytes.
  const std::string spilled = ReadFile(Path("out.pftrace"));
  options_.sort_buffer_bytes = 64 << 20;
  absl::StatusOr<ExportSummary> in_memory =
      ExportTrace(Path("in.gpuos"), Path("out2.pftrace"), options_);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  EXPECT_EQ(in_memory->sort_runs_spilled, 0u);
  EXPECT_TRUE(ReadFile(Path("out2.pftrace")) == spilled);
}

TEST_F(PerfettoExportTest, SlicesThatDoNotNestGoToOverflowLanes) {
  std::vector<v1::Event> events = {
      ProcessStart(kT0, 100, "python3"),
      // Two graph kernels overlapping on one stream, and a third inside the
      // first: the second cannot nest, the third can.
      Api(kT0 + 100, 100, 100, 1000, "cudaGraphLaunch_v10000", 5),
      Kernel(kT0 + 10'000, 100, 50'000, "graph_a", 5),
      Kernel(kT0 + 30'000, 100, 50'000, "graph_b", 5),
      Kernel(kT0 + 20'000, 100, 5'000, "graph_c", 5),
      // An API call that straddles the end of an NVTX range (clock skew).
      Nvtx(kT0 + 100'000, 100, 100, 10'000, "skewed"),
      Api(kT0 + 105'000, 100, 100, 10'000, "cudaStreamSynchronize_v3020", 6),
  };
  ExportSummary summary;
  Decoded out = ExportAndCheck(events, &summary);
  EXPECT_EQ(summary.overflow_lanes, 2u);
  // One graph launch fans out to its three kernels.
  EXPECT_EQ(check_.flows, 3u);
  EXPECT_EQ(out.Named("cudaGraphLaunch")[0]->flow_ids.size(), 3u);

  // The lane has its stream's name (Perfetto merges same-named siblings back
  // into one visual track) and the same parent.
  const DecodedTrack* stream = out.TrackNamed("GPU 0 stream 7 (context 1)");
  ASSERT_NE(stream, nullptr);
  std::vector<const DecodedTrack*> lanes;
  for (const auto& [uuid, track] : out.tracks) {
    if (track.name == stream->name && uuid != stream->uuid) lanes.push_back(&track);
  }
  ASSERT_EQ(lanes.size(), 1u);
  EXPECT_EQ(lanes[0]->parent, stream->parent);
  EXPECT_EQ(out.Named("graph_a")[0]->track, stream->uuid);
  EXPECT_EQ(out.Named("graph_c")[0]->track, stream->uuid);
  EXPECT_EQ(out.Named("graph_b")[0]->track, lanes[0]->uuid);
  // The thread's overflow lane hangs off the thread track.
  const DecodedTrack* overlap = out.TrackNamed("100 overlap");
  ASSERT_NE(overlap, nullptr);
  EXPECT_EQ(out.Named("cudaStreamSynchronize")[0]->track, overlap->uuid);
}

TEST_F(PerfettoExportTest, GpuWorkStampedBeforeItsCallStillGetsBothFlowEnds) {
  // CPU and GPU clocks disagree by a few microseconds: the kernel appears to
  // start before the launch call.
  std::vector<v1::Event> events = {
      ProcessStart(kT0, 100, "python3"),
      Api(kT0 + 10'000, 100, 100, 5'000, "cudaLaunchKernel_v7000", 3),
      Kernel(kT0 + 8'000, 100, 20'000, "early", 3),
  };
  Decoded out = ExportAndCheck(events);
  EXPECT_EQ(check_.flows, 1u);
  ASSERT_EQ(out.Named("early")[0]->flow_ids.size(), 1u);
  EXPECT_EQ(out.Named("cudaLaunchKernel")[0]->terminating_flow_ids,
            out.Named("early")[0]->flow_ids);
}

// A blocked interval that another traced thread ended gets an arrow from
// the waker's thread at the wakeup to the wakee's off-CPU slice; a waker
// outside the traced processes, or none, gets no arrow.
TEST_F(PerfettoExportTest, WakeupsAreFlowArrowsFromTheWakerToTheWakee) {
  v1::Event woken = OffCpu(kT0 + 1'000, 100, 100, 50'000, v1::OFF_CPU_CAUSE_FUTEX, 202);
  woken.mutable_off_cpu()->set_runqueue_ns(5'000);
  woken.mutable_off_cpu()->set_woken_by_tid(101);
  woken.mutable_off_cpu()->set_waker_pid(100);
  v1::Event foreign = OffCpu(kT0 + 100'000, 100, 100, 10'000, v1::OFF_CPU_CAUSE_FUTEX, 202);
  foreign.mutable_off_cpu()->set_woken_by_tid(999);
  foreign.mutable_off_cpu()->set_waker_pid(555);
  std::vector<v1::Event> events = {ProcessStart(kT0, 100, "python3"),
                                   ThreadStart(kT0, 100, 101, "pt_autograd_0"), woken, foreign};
  Decoded out = ExportAndCheck(events);
  EXPECT_EQ(check_.flows, 1u);
  ASSERT_EQ(out.Named("wakes").size(), 1u);
  ASSERT_EQ(out.Named("woken").size(), 1u);
  const DecodedEvent& from = *out.Named("wakes")[0];
  const DecodedEvent& to = *out.Named("woken")[0];
  EXPECT_EQ(from.ts, kT0 + 1'000 + 45'000) << "at the wakeup: the start of the run-queue tail";
  EXPECT_EQ(to.ts, from.ts);
  ASSERT_EQ(from.flow_ids.size(), 1u);
  EXPECT_EQ(to.terminating_flow_ids, from.flow_ids);
  EXPECT_EQ(to.track, out.Named("off-CPU (futex)")[0]->track) << "on the wakee's off-CPU track";
  EXPECT_NE(from.track, to.track);
  EXPECT_EQ(from.args.at("wakee_tid"), "100");
}

TEST_F(PerfettoExportTest, ChromeJsonLoadsAndBalances) {
  options_.chrome_json_path = Path("out.json");
  ExportSummary summary;
  ExportAndCheck(TrainingLikeTrace(), &summary);
  EXPECT_GT(summary.chrome_json_events, 0u);
  // Load it with Python's json module, as a script would, and check that
  // B/E balance per (pid, tid), flows pair up, and names are there.
  const std::string script = Path("check.py");
  std::ofstream(script) << R"(
import collections, json, sys
doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"]
depth = collections.Counter()
flows = collections.Counter()
names = set()
for e in events:
    key = (e["pid"], e["tid"])
    if e["ph"] == "B":
        depth[key] += 1
        names.add(e["name"])
    elif e["ph"] == "E":
        depth[key] -= 1
        assert depth[key] >= 0, ("E without B", e)
    elif e["ph"] in ("s", "f"):
        flows[e["id"]] += 1 if e["ph"] == "s" else 100
assert all(v == 0 for v in depth.values()), depth
assert all(v == 101 for v in flows.values()), flows
assert len(flows) == 3, flows
for name in ("mmap", "munmap", "futex wait", "cudaLaunchKernel", "Memcpy HtoD", "forward"):
    assert name in names, name
assert any(e["ph"] == "C" and e["name"] == "GPU 0 busy %" for e in events)
assert any(e["ph"] == "M" and e["args"]["name"] == "100 OS" for e in events)
print("ok", len(events))
)";
  const std::string command = absl::StrCat("python3 ", script, " ", Path("out.json"), " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char line[4096];
  std::string output;
  while (fgets(line, sizeof line, pipe) != nullptr) output += line;
  const int status = pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) GTEST_SKIP() << "python3 not installed";
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output.rfind("ok ", 0), 0u) << output;
}

TEST_F(PerfettoExportTest, DamagedInputExportsWhatPrecedesTheDamage) {
  std::vector<v1::Event> events = {ProcessStart(kT0, 100, "python3")};
  for (uint32_t i = 0; i < 20000; ++i) events.push_back(FutexWait(kT0 + i * 1000, 100, 100, 500));
  WriteTrace(Path("in.gpuos"), events);
  // Cut the file in the middle of a later batch.
  const std::string bytes = ReadFile(Path("in.gpuos"));
  std::ofstream(Path("cut.gpuos"), std::ios::binary) << bytes.substr(0, bytes.size() * 3 / 4);

  absl::Status status = ExportPerfetto(Path("cut.gpuos"), Path("out.pftrace"), options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  absl::StatusOr<PerfettoTraceCheck> check = CheckPerfettoTraceFile(Path("out.pftrace"));
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->ok()) << ::testing::PrintToString(check->violations);
  EXPECT_GT(check->events_by_name["futex wait"], 4096u);
  EXPECT_LT(check->events_by_name["futex wait"], 20000u);
}

TEST_F(PerfettoExportTest, FailuresLeaveNoOutputBehind) {
  absl::Status missing = ExportPerfetto(Path("nope.gpuos"), Path("out.pftrace"), options_);
  EXPECT_FALSE(missing.ok());
  EXPECT_FALSE(std::filesystem::exists(Path("out.pftrace")));

  WriteTrace(Path("in.gpuos"), TrainingLikeTrace());
  absl::Status unwritable =
      ExportPerfetto(Path("in.gpuos"), Path("no-such-dir/out.pftrace"), options_);
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.message().find("no-such-dir"), std::string::npos) << unwritable;

  // A JSON path that cannot be written fails the export and removes the
  // Perfetto file written so far.
  options_.chrome_json_path = Path("no-such-dir/out.json");
  EXPECT_FALSE(ExportPerfetto(Path("in.gpuos"), Path("out.pftrace"), options_).ok());
  EXPECT_FALSE(std::filesystem::exists(Path("out.pftrace")));
  EXPECT_FALSE(std::filesystem::exists(Path("out.pftrace.partial")));
}

// Each block I/O request is a slice on its device's track under the process
// of the thread that issued it, named after what it does, with the request
// in its args; requests in flight together go to overflow lanes of that
// track; a device without a name shows its major:minor.
// Capture windows are slices on a track of their process, named after what
// opened them; one whose opening subscribed CUPTI again says so.
TEST_F(PerfettoExportTest, CaptureWindowsAreSlicesThatSayWhetherTheySubscribedCuptiAgain) {
  auto edge = [](uint64_t ts, bool open, int64_t step, bool subscribed) {
    v1::Event event = At(ts, 100, 100);
    v1::CaptureWindow* w = event.mutable_capture_window();
    w->set_edge(open ? v1::CaptureWindow::OPEN : v1::CaptureWindow::CLOSE);
    w->set_step(step);
    w->set_reason("every=10s,steps=2");
    w->set_cupti_subscribed(subscribed);
    return event;
  };
  std::vector<v1::Event> events = {
      ProcessStart(kT0, 100, "python3"),
      edge(kT0 + 1 * kMs, true, 0, false),  edge(kT0 + 3 * kMs, false, 1, false),
      edge(kT0 + 10 * kMs, true, 9, true),  edge(kT0 + 12 * kMs, false, 10, false),
  };
  Decoded out = ExportAndCheck(events);
  const std::vector<const DecodedEvent*> windows = out.Named("capture: every=10s,steps=2");
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0]->ts, kT0 + 1 * kMs);
  EXPECT_EQ(windows[0]->args.at("cupti_subscribed"), "false");
  EXPECT_EQ(windows[1]->ts, kT0 + 10 * kMs);
  EXPECT_EQ(windows[1]->args.at("cupti_subscribed"), "true");
  EXPECT_EQ(windows[0]->track, windows[1]->track);
}

TEST_F(PerfettoExportTest, BlockIoRequestsAreSlicesOnTheirDeviceTrackUnderTheIssuingProcess) {
  options_.chrome_json_path = Path("out.json");
  std::vector<v1::Event> events = {
      ProcessStart(kT0, 100, "python3"),
      ThreadStart(kT0, 100, 102, "pt_data_0"),
      ProcessStart(kT0, 200, "pt_worker"),
      BlockIo(kT0 + 1'000, 100, 102, 2 * kMs, "vda", "R", 4096),
      BlockIo(kT0 + 500'000, 100, 100, 3 * kMs, "vda", "WS", 65536),  // overlaps the read's end
      BlockIo(kT0 + 1'000, 200, 200, 1 * kMs, "vda", "RA", 131072),
      BlockIo(kT0 + 5 * kMs, 100, 0, 100'000, "", "FWS", 512, -5),  // issuer not known
      BlockIo(kT0 + 6 * kMs, 100, 100, 100'000, "vda", "F", 0),
  };
  ExportSummary summary;
  Decoded out = ExportAndCheck(events, &summary);
  EXPECT_EQ(summary.overflow_lanes, 1u);

  std::map<std::string, const DecodedTrack*> processes;
  std::vector<const DecodedTrack*> disks;
  for (const auto& [uuid, track] : out.tracks) {
    if (track.process) processes[track.name] = &track;
    if (track.name == "disk vda") disks.push_back(&track);
  }
  ASSERT_EQ(processes.size(), 2u);
  ASSERT_EQ(disks.size(), 3u) << "python3's, its overflow lane, pt_worker's";
  std::map<uint64_t, int> disks_by_parent;
  for (const DecodedTrack* disk : disks) ++disks_by_parent[disk->parent];
  EXPECT_EQ(disks_by_parent[processes.at("python3")->uuid], 2);
  EXPECT_EQ(disks_by_parent[processes.at("pt_worker")->uuid], 1);
  const DecodedTrack* by_number = out.TrackNamed("disk 254:16");
  ASSERT_NE(by_number, nullptr);
  EXPECT_EQ(by_number->parent, processes.at("python3")->uuid);

  ASSERT_EQ(out.Named("disk read").size(), 2u);
  const DecodedEvent* read = out.Named("disk read")[0];
  EXPECT_EQ(read->ts, kT0 + 1'000);
  EXPECT_EQ(read->category, "os");
  EXPECT_EQ(read->args, (std::map<std::string, std::string>{
                            {"bytes", "4096"}, {"rwbs", "R"}, {"sector", "2048"}, {"issuing_tid", "102"},
                            {"error", "0"}}));
  EXPECT_EQ(out.tracks.at(read->track).parent, processes.at("python3")->uuid);
  ASSERT_EQ(out.Named("disk write").size(), 2u);
  const DecodedEvent* write = out.Named("disk write")[0];
  EXPECT_NE(write->track, read->track) << "in flight together: an overflow lane";
  EXPECT_EQ(out.tracks.at(write->track).name, "disk vda");
  const DecodedEvent* failed = out.Named("disk write")[1];
  EXPECT_EQ(failed->track, by_number->uuid);
  EXPECT_EQ(failed->args.at("error"), "-5");
  EXPECT_EQ(failed->args.count("issuing_tid"), 0u);
  ASSERT_EQ(out.Named("disk flush").size(), 1u);

  // Chrome JSON: the device track is a made-up thread of the process.
  const std::string json = ReadFile(Path("out.json"));
  EXPECT_NE(json.find(R"("name":"disk read","cat":"os")"), std::string::npos);
  EXPECT_NE(json.find(R"("pid":100,"tid":1073741)"), std::string::npos);
  EXPECT_NE(json.find(R"({"name":"disk vda"})"), std::string::npos);
  EXPECT_NE(json.find(R"({"name":"disk 254:16"})"), std::string::npos);
  EXPECT_NE(json.find(R"("issuing_tid":102)"), std::string::npos);
}

TEST(BlockIoOperationTest, NamesWhatTheRequestDoesFromItsRwbs) {
  auto name = [](const std::string& rwbs) { return std::string(BlockIoKind::kNames[BlockIoOperation(rwbs)]); };
  EXPECT_EQ(name("R"), "disk read");
  EXPECT_EQ(name("RA"), "disk read");
  EXPECT_EQ(name("RSM"), "disk read");
  EXPECT_EQ(name("W"), "disk write");
  EXPECT_EQ(name("WS"), "disk write");
  EXPECT_EQ(name("FWS"), "disk write");
  EXPECT_EQ(name("WFS"), "disk write");
  EXPECT_EQ(name("D"), "disk discard");
  EXPECT_EQ(name("DS"), "disk discard");
  EXPECT_EQ(name("F"), "disk flush");
  EXPECT_EQ(name("FN"), "disk flush");
  EXPECT_EQ(name("N"), "disk I/O");
  EXPECT_EQ(name(""), "disk I/O");
}

TEST(CudaApiDisplayNameTest, StripsOnlyRuntimeVersionSuffixes) {
  EXPECT_EQ(CudaApiDisplayName("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(CudaApiDisplayName("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(CudaApiDisplayName("cudaMalloc_v11000"), "cudaMalloc");
  EXPECT_EQ(CudaApiDisplayName("cuMemcpyHtoD_v2"), "cuMemcpyHtoD_v2");
  EXPECT_EQ(CudaApiDisplayName("cudaFoo_v70a0"), "cudaFoo_v70a0");
  EXPECT_EQ(CudaApiDisplayName("_v1234"), "_v1234");
  EXPECT_EQ(CudaApiDisplayName("cudaGetDevice"), "cudaGetDevice");
}

}  // namespace
}  // namespace gpuos
