// Merging traces of several hosts; see trace_merge.h.
#include "stream/trace_merge.h"

#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "stream/clock_alignment.h"
#include "stream/record_framing.h"
#include "stream/trace_reader.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

uint32_t LoadLittleEndian32(const unsigned char* bytes) {
  return static_cast<uint32_t>(bytes[0]) | (static_cast<uint32_t>(bytes[1]) << 8) |
         (static_cast<uint32_t>(bytes[2]) << 16) | (static_cast<uint32_t>(bytes[3]) << 24);
}

// What the merge needs before it starts writing: the trailer's end clock
// (the last record) and the allreduce kernels.  Frames are read raw and only
// those that can hold either are parsed, so this pass costs a read of the
// file, not a parse.
struct Prescan {
  std::optional<v1::TraceTrailer> trailer;
  std::vector<uint64_t> allreduce_ends;
};

bool IsAllreduceKernel(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  return absl::StrContains(lower, "nccl") && absl::StrContains(lower, "allreduce");
}

absl::StatusOr<Prescan> PrescanTrace(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (file == nullptr) return absl::NotFoundError(absl::StrFormat("cannot open %s: %s", path, strerror(errno)));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(file, std::fclose);
  std::vector<char> stdio_buffer(1 << 20);
  setvbuf(file, stdio_buffer.data(), _IOFBF, stdio_buffer.size());
  if (std::fseek(file, kFileMagicBytes, SEEK_SET) != 0) return Prescan();

  // Per (pid, device): allreduce kernel ends.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> series;
  Prescan out;
  std::string payload;
  v1::Record record;
  bool first = true;
  for (;;) {
    unsigned char frame[kFrameHeaderBytes];
    if (std::fread(frame, 1, sizeof(frame), file) != sizeof(frame)) break;
    const uint32_t length = LoadLittleEndian32(frame);
    if (length == 0 || length > kMaxRecordBytes) break;  // damage: the merge pass reports it
    payload.resize(length);
    if (std::fread(payload.data(), 1, length, file) != length) break;
    const bool header = first;
    first = false;
    if (header) continue;
    // A batch is parsed only when it names an NCCL kernel; anything else
    // could be the trailer, which is small.
    const bool may_hold_kernels = payload.find("nccl") != std::string::npos ||
                                  payload.find("NCCL") != std::string::npos;
    if (!may_hold_kernels && length > 4096) continue;
    if (Crc32(payload) != LoadLittleEndian32(frame + 4) || !record.ParseFromString(payload)) break;
    if (record.has_trailer()) {
      out.trailer = record.trailer();
    } else if (record.has_batch() && may_hold_kernels) {
      for (const v1::Event& event : record.batch().events()) {
        if (event.has_gpu_kernel() && IsAllreduceKernel(event.gpu_kernel().name())) {
          series[{event.pid(), event.gpu_kernel().device()}].push_back(
              event.ts_ns() + event.gpu_kernel().duration_ns());
        }
      }
    }
  }
  for (auto& [key, ends] : series) {
    if (ends.size() > out.allreduce_ends.size()) out.allreduce_ends = std::move(ends);
  }
  std::sort(out.allreduce_ends.begin(), out.allreduce_ends.end());
  return out;
}

uint64_t Shifted(uint64_t ts, int64_t skew) {
  if (ts == 0) return 0;  // unset stays unset
  const int64_t moved = static_cast<int64_t>(ts) + skew;
  return moved > 0 ? static_cast<uint64_t>(moved) : 1;
}

// Moves an event of input `host` onto the merged trace's clock and ids.
void Rebase(v1::Event* event, size_t host, int64_t skew) {
  event->set_ts_ns(Shifted(event->ts_ns(), skew));
  if (host == 0) return;
  event->set_pid(NamespacedId(event->pid(), host));
  event->set_tid(NamespacedId(event->tid(), host));
  switch (event->payload_case()) {
    case v1::Event::kProcessStart: {
      auto* p = event->mutable_process_start();
      p->set_ppid(NamespacedId(p->ppid(), host));
      p->set_parent_tid(NamespacedId(p->parent_tid(), host));
      break;
    }
    case v1::Event::kThreadStart: {
      auto* t = event->mutable_thread_start();
      t->set_creator_tid(NamespacedId(t->creator_tid(), host));
      break;
    }
    case v1::Event::kExec:
      event->mutable_exec()->set_old_tid(NamespacedId(event->exec().old_tid(), host));
      break;
    case v1::Event::kOffCpu: {
      auto* o = event->mutable_off_cpu();
      o->set_woken_by_tid(NamespacedId(o->woken_by_tid(), host));
      o->set_waker_pid(NamespacedId(o->waker_pid(), host));
      break;
    }
    case v1::Event::kNvtxRange:
      event->mutable_nvtx_range()->set_end_tid(NamespacedId(event->nvtx_range().end_tid(), host));
      break;
    default:
      break;
  }
}

void RebaseTimesOnly(v1::Event* event, int64_t skew) {
  if (event->has_page_faults()) {
    event->mutable_page_faults()->set_last_ns(Shifted(event->page_faults().last_ns(), skew));
  }
}

// One input being read: its current batch and the next event in it.
struct Cursor {
  std::unique_ptr<TraceReader> reader;
  v1::Record record;
  int next = 0;
  bool done = false;
  std::optional<v1::TraceTrailer> trailer;

  // The next event, or null at the end of the input.
  v1::Event* Peek() {
    while (!done) {
      if (record.has_batch() && next < record.batch().events_size()) {
        return record.mutable_batch()->mutable_events(next);
      }
      next = 0;
      if (!reader->Next(&record)) {
        done = true;
        break;
      }
      if (record.has_trailer()) trailer = record.trailer();
    }
    return nullptr;
  }
};

void AddMaps(const google::protobuf::Map<std::string, uint64_t>& from,
             google::protobuf::Map<std::string, uint64_t>* to) {
  for (const auto& [key, n] : from) (*to)[key] += n;
}

}  // namespace

uint32_t NamespacedId(uint32_t id, size_t host_index) {
  if (id == 0) return 0;
  return static_cast<uint32_t>(host_index) * kMergedPidStride + id;
}

absl::StatusOr<std::vector<uint64_t>> AllreduceKernelEnds(const std::string& path) {
  absl::StatusOr<Prescan> scan = PrescanTrace(path);
  if (!scan.ok()) return scan.status();
  return std::move(scan->allreduce_ends);
}

namespace {

absl::Status CheckInputCount(size_t n) {
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrFormat("merge needs at least two traces to join (got %d)", n));
  }
  if (n > kMaxMergedInputs) {
    return absl::InvalidArgumentError(
        absl::StrFormat("merge joins at most %d traces (got %d)", kMaxMergedInputs, n));
  }
  return absl::OkStatus();
}

// The inputs opened and prescanned; none of them is the output.
absl::Status OpenInputs(const std::vector<std::string>& inputs, const std::string& output,
                        std::vector<Cursor>* cursors, std::vector<Prescan>* scans) {
  struct stat out_st;
  const bool output_exists = ::stat(output.c_str(), &out_st) == 0;
  cursors->resize(inputs.size());
  scans->resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    struct stat in_st;
    if (output_exists && ::stat(inputs[i].c_str(), &in_st) == 0 && in_st.st_dev == out_st.st_dev &&
        in_st.st_ino == out_st.st_ino) {
      return absl::InvalidArgumentError(
          absl::StrFormat("the output %s is also an input; name another file with -o", output));
    }
    absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(inputs[i]);
    if (!reader.ok()) return absl::InvalidArgumentError(reader.status().message());
    (*cursors)[i].reader = std::move(*reader);
    absl::StatusOr<Prescan> scan = PrescanTrace(inputs[i]);
    if (!scan.ok()) return absl::InvalidArgumentError(scan.status().message());
    (*scans)[i] = std::move(*scan);
  }
  return absl::OkStatus();
}

// The inputs' skews: from the wall clocks, refined from NCCL allreduce
// kernels where both hosts have them, else from CPU collectives.
class SkewFinder {
 public:
  SkewFinder(const std::vector<std::string>& inputs, const MergeOptions& options) : inputs_(inputs), options_(options) {}

  SkewEstimate Find(size_t i, const std::vector<WallClockOffset>& offsets, const std::vector<Prescan>& scans) {
    SkewEstimate skew;
    skew.basis = "reference";
    if (i == 0) return skew;
    skew = SkewFromWallClocks(offsets[0], offsets[i]);
    if (auto refined = RefineSkewFromCollectives(scans[0].allreduce_ends, scans[i].allreduce_ends, skew)) {
      return *refined;
    }
    if (!options_.cpu_collectives) return skew;
    if (!reference_cpu_) reference_cpu_ = CpuCollectives(0);
    if (auto refined = RefineSkewFromStepCollectives(*reference_cpu_, CpuCollectives(i), skew)) return *refined;
    return skew;
  }

 private:
  std::vector<StepCollectiveEnds> CpuCollectives(size_t i) {
    absl::StatusOr<std::vector<StepCollectiveEnds>> ends = options_.cpu_collectives(inputs_[i]);
    return ends.ok() ? std::move(*ends) : std::vector<StepCollectiveEnds>();
  }

  const std::vector<std::string>& inputs_;
  const MergeOptions& options_;
  std::optional<std::vector<StepCollectiveEnds>> reference_cpu_;
};

v1::MergedHost MergedHostOf(const std::string& input, size_t i, const v1::TraceHeader& h, const Prescan& scan,
                            const SkewEstimate& skew) {
  v1::MergedHost host;
  host.set_hostname(h.hostname());
  host.set_source(input);
  host.set_skew_ns(skew.skew_ns);
  host.set_skew_bound_ns(skew.bound_ns);
  host.set_skew_basis(skew.basis);
  host.set_collectives_matched(skew.collectives_matched);
  *host.mutable_start_clock() = h.start_clock();
  if (scan.trailer) *host.mutable_end_clock() = scan.trailer->end_clock();
  host.set_root_pid(NamespacedId(h.root_pid(), i));
  *host.mutable_command_line() = h.command_line();
  return host;
}

// The header: the first input's, spanning every input, ids namespaced.
v1::TraceHeader MergedHeader(const std::vector<Cursor>& cursors, const std::vector<int64_t>& skews,
                             int64_t reference_offset, const std::vector<v1::MergedHost>& hosts) {
  v1::TraceHeader header = cursors[0].reader->header();
  header.clear_flight_window();  // a window's span is no longer the file's
  uint64_t start_ns = ~0ull;
  bool any_attach = false;
  uint64_t attach_start = ~0ull;
  v1::AttachInfo attach;
  for (size_t i = 0; i < cursors.size(); ++i) {
    const v1::TraceHeader& h = cursors[i].reader->header();
    start_ns = std::min(start_ns, Shifted(h.start_clock().monotonic_ns(), skews[i]));
    if (!h.has_attach()) continue;
    any_attach = true;
    attach_start = std::min(attach_start, Shifted(h.attach().start_ns(), skews[i]));
    for (uint32_t pid : h.attach().target_pids()) attach.add_target_pids(NamespacedId(pid, i));
    attach.set_gpu_procs(attach.gpu_procs() || h.attach().gpu_procs());
    attach.set_requested_duration_ns(std::max(attach.requested_duration_ns(), h.attach().requested_duration_ns()));
  }
  header.mutable_start_clock()->set_monotonic_ns(start_ns);
  header.mutable_start_clock()->set_realtime_ns(static_cast<uint64_t>(static_cast<int64_t>(start_ns) + reference_offset));
  if (any_attach) {
    attach.set_start_ns(attach_start);
    *header.mutable_attach() = attach;
  }
  v1::MergedTrace* merged = header.mutable_merged();
  merged->set_pid_stride(kMergedPidStride);
  for (const v1::MergedHost& host : hosts) *merged->add_hosts() = host;
  return header;
}

// The k-way merge.  TracerStats are cumulative per recording and the
// report takes the latest one, so each input's last is held back and one
// sum of them written at the end.
absl::Status MergeEvents(std::vector<Cursor>& cursors, const std::vector<int64_t>& skews, TraceWriter& writer,
                         uint64_t* events) {
  std::vector<std::optional<v1::TracerStats>> tracer_stats(cursors.size());
  uint64_t last_ts = 0;
  using Entry = std::pair<uint64_t, size_t>;  // (shifted ts, input)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t i = 0; i < cursors.size(); ++i) {
    if (v1::Event* e = cursors[i].Peek()) heap.emplace(Shifted(e->ts_ns(), skews[i]), i);
  }
  while (!heap.empty()) {
    const size_t i = heap.top().second;
    heap.pop();
    Cursor& cursor = cursors[i];
    v1::Event* event = cursor.Peek();
    Rebase(event, i, skews[i]);
    RebaseTimesOnly(event, skews[i]);
    last_ts = std::max(last_ts, event->ts_ns());
    if (event->has_tracer_stats()) {
      tracer_stats[i] = event->tracer_stats();
    } else {
      if (absl::Status status = writer.Append(*event); !status.ok()) return status;
      ++*events;
    }
    ++cursor.next;
    if (v1::Event* e = cursor.Peek()) heap.emplace(Shifted(e->ts_ns(), skews[i]), i);
  }
  v1::Event stats_event;
  for (const auto& stats : tracer_stats) {
    if (!stats) continue;
    v1::TracerStats* sum = stats_event.mutable_tracer_stats();
    AddMaps(stats->ring_buffer_drops(), sum->mutable_ring_buffer_drops());
    AddMaps(stats->map_full_drops(), sum->mutable_map_full_drops());
    sum->set_events_written(sum->events_written() + stats->events_written());
  }
  if (!stats_event.has_tracer_stats()) return absl::OkStatus();
  stats_event.set_ts_ns(last_ts);
  ++*events;
  return writer.Append(stats_event);
}

// Warnings for the inputs that did not end cleanly; true when all did.
bool AllEndedCleanly(const std::vector<std::string>& inputs, const std::vector<Cursor>& cursors,
                     std::vector<std::string>* warnings) {
  bool all_clean = true;
  for (size_t i = 0; i < cursors.size(); ++i) {
    if (!cursors[i].reader->status().ok()) {
      all_clean = false;
      warnings->push_back(absl::StrFormat("%s is damaged; merged what was read before the damage: %s", inputs[i],
                                          cursors[i].reader->status().message()));
    } else if (!cursors[i].trailer) {
      all_clean = false;
      warnings->push_back(absl::StrFormat("%s has no trailer (its recording did not end cleanly)", inputs[i]));
    }
  }
  return all_clean;
}

// The first input's write failure, with the others' losses added.
void AddWriteFailure(const v1::TraceTrailer& t, int64_t skew, const std::string& hostname,
                     std::optional<v1::TraceWriteFailure>* failure) {
  if (!t.has_write_failure()) return;
  if (!*failure) {
    *failure = t.write_failure();
    (*failure)->set_at_ns(Shifted((*failure)->at_ns(), skew));
    (*failure)->set_error(absl::StrFormat("%s (%s)", (*failure)->error(), hostname));
  } else {
    (*failure)->set_lost_events((*failure)->lost_events() + t.write_failure().lost_events());
    AddMaps(t.write_failure().lost_by_kind(), (*failure)->mutable_lost_by_kind());
  }
}

// The trailer of inputs that all ended cleanly.
v1::TraceTrailer MergedTrailer(const std::vector<Cursor>& cursors, const std::vector<int64_t>& skews,
                               int64_t reference_offset, const MergeResult& result) {
  v1::TraceTrailer trailer = *cursors[0].trailer;
  trailer.clear_cuda_attach();
  uint64_t end_ns = 0, attach_end = 0, dropped = 0;
  std::optional<v1::TraceWriteFailure> failure;
  for (size_t i = 0; i < cursors.size(); ++i) {
    const v1::TraceTrailer& t = *cursors[i].trailer;
    end_ns = std::max(end_ns, Shifted(t.end_clock().monotonic_ns(), skews[i]));
    attach_end = std::max(attach_end, Shifted(t.attach_end_ns(), skews[i]));
    dropped += t.dropped_events();
    for (const v1::CudaAttachStatus& cuda : t.cuda_attach()) {
      v1::CudaAttachStatus* out = trailer.add_cuda_attach();
      *out = cuda;
      out->set_pid(NamespacedId(cuda.pid(), i));
    }
    AddWriteFailure(t, skews[i], result.hosts[i].hostname(), &failure);
  }
  trailer.mutable_end_clock()->set_monotonic_ns(end_ns);
  trailer.mutable_end_clock()->set_realtime_ns(static_cast<uint64_t>(static_cast<int64_t>(end_ns) + reference_offset));
  trailer.set_attach_end_ns(attach_end);
  // What this file holds (the inputs' TracerStats are one sum here).
  trailer.set_events_written(result.events);
  trailer.set_dropped_events(dropped);
  if (failure) *trailer.mutable_write_failure() = *failure;
  return trailer;
}

}  // namespace

absl::StatusOr<MergeResult> MergeTraces(const std::vector<std::string>& inputs, const std::string& output,
                                        const MergeOptions& options) {
  if (absl::Status s = CheckInputCount(inputs.size()); !s.ok()) return s;
  std::vector<Cursor> cursors;
  std::vector<Prescan> scans;
  if (absl::Status s = OpenInputs(inputs, output, &cursors, &scans); !s.ok()) return s;

  MergeResult result;
  std::vector<WallClockOffset> offsets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const v1::ClockPair* end = scans[i].trailer ? &scans[i].trailer->end_clock() : nullptr;
    offsets.push_back(WallClockOffsetOf(cursors[i].reader->header().start_clock(), end));
  }
  std::vector<int64_t> skews;
  SkewFinder finder(inputs, options);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const SkewEstimate skew = finder.Find(i, offsets, scans);
    skews.push_back(skew.skew_ns);
    result.hosts.push_back(MergedHostOf(inputs[i], i, cursors[i].reader->header(), scans[i], skew));
  }
  const int64_t reference_offset = offsets[0].offset_ns;

  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(output, TraceWriter::Options());
  if (!writer.ok()) return writer.status();
  absl::Status status = (*writer)->WriteHeader(MergedHeader(cursors, skews, reference_offset, result.hosts));
  if (status.ok()) status = MergeEvents(cursors, skews, **writer, &result.events);
  if (status.ok() && AllEndedCleanly(inputs, cursors, &result.warnings)) {
    status = (*writer)->WriteTrailer(MergedTrailer(cursors, skews, reference_offset, result));
  }
  if (!status.ok()) return status;
  status = (*writer)->Close();
  if (!status.ok()) return status;
  return result;
}

}  // namespace gpuos
