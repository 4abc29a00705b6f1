// See flight_recorder.h.
#include "stream/flight_recorder.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/monotonic_clock.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

// The smallest batch a size-bound segment's writer fills before writing
// (1/16 of a segment otherwise, so a segment ends within 1/16 of its cap).
constexpr size_t kMinBatchBytes = 1024;

std::string EventKind(const v1::Event& event) {
  const auto* field = v1::Event::descriptor()->FindFieldByNumber(event.payload_case());
  return field != nullptr ? field->name() : "unknown";
}

absl::Status ErrnoError(const std::string& what, int err) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", strerror(err)));
}

void MergeFailure(const v1::TraceWriteFailure& from, bool* failed, v1::TraceWriteFailure* into) {
  if (!*failed) {
    *failed = true;
    into->set_error(from.error());
    into->set_at_ns(from.at_ns());
  }
  into->set_lost_events(into->lost_events() + from.lost_events());
  for (const auto& [kind, n] : from.lost_by_kind()) (*into->mutable_lost_by_kind())[kind] += n;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FlightRecorder>> FlightRecorder::Create(Options options) {
  if ((options.max_bytes == 0) == (options.max_span_ns == 0)) {
    return absl::InvalidArgumentError("a flight recorder needs either a size or a duration");
  }
  if (options.segments < 2) options.segments = 2;
  if (options.ring_dir.empty()) options.ring_dir = options.output_path + ".flight";
  if (::mkdir(options.ring_dir.c_str(), 0755) != 0) {
    const int err = errno;
    struct stat st {};
    if (err != EEXIST || ::stat(options.ring_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return ErrnoError(absl::StrCat("cannot create the flight recorder's directory ", options.ring_dir), err);
    }
    // Segments of an earlier run are no part of this one.
    if (DIR* dir = ::opendir(options.ring_dir.c_str())) {
      while (const dirent* entry = ::readdir(dir)) {
        const std::string name = entry->d_name;
        if (absl::StartsWith(name, "seg-") && absl::EndsWith(name, ".gpuos")) {
          ::unlink(absl::StrCat(options.ring_dir, "/", name).c_str());
        }
      }
      ::closedir(dir);
    }
  }
  if (options.owner != static_cast<uid_t>(-1)) {
    if (::chown(options.ring_dir.c_str(), options.owner, options.group) != 0) {
      // Not fatal: root can still write the ring; the user just cannot clean it.
    }
  }
  return std::unique_ptr<FlightRecorder>(new FlightRecorder(std::move(options)));
}

FlightRecorder::FlightRecorder(Options options) : options_(std::move(options)) {
  if (options_.max_bytes != 0) {
    segment_bytes_ = options_.max_bytes / options_.segments;
    batch_bytes_ = std::clamp<size_t>(segment_bytes_ / 16, kMinBatchBytes, 1 << 20);
  } else {
    batch_bytes_ = 1 << 20;
  }
}

FlightRecorder::~FlightRecorder() {
  // The ring stays on disk unless Close() removed it: without a dump it is
  // all there is of the recording.
  if (current_) current_->Close().IgnoreError();
}

absl::Status FlightRecorder::WriteHeader(const v1::TraceHeader& header) {
  if (has_header_) return absl::FailedPreconditionError("the flight recorder already has a header");
  header_ = header;
  has_header_ = true;
  // The first segment opens at the recording's start.
  latest_ns_ = header.start_clock().monotonic_ns();
  return OpenSegment();
}

absl::Status FlightRecorder::OpenSegment() {
  Segment segment;
  segment.path = absl::StrFormat("%s/seg-%06d.gpuos", options_.ring_dir, next_segment_++);
  segment.open_ns = latest_ns_;
  TraceWriter::Options writer_options;
  writer_options.max_batch_bytes = batch_bytes_;
  auto writer = TraceWriter::Create(segment.path, writer_options);
  if (!writer.ok()) return writer.status();
  if (options_.owner != static_cast<uid_t>(-1)) {
    if (::fchown((*writer)->fd(), options_.owner, options_.group) != 0) {
      // Not fatal, as for the directory.
    }
  }
  // A segment reads on its own (what a killed recorder leaves); the table of
  // syscall names, kilobytes that every dump gets anyway, stays out.
  v1::TraceHeader header = header_;
  header.clear_syscall_names();
  if (absl::Status s = (*writer)->WriteHeader(header); !s.ok()) return s;
  absl::Status table_status;
  table_.ForEachSnapshotEvent(latest_ns_, [&](const v1::Event& event) {
    if (!table_status.ok()) return;
    table_status = (*writer)->Append(event);
    ++segment.table_events;
  });
  current_ = std::move(*writer);
  segments_.push_back(std::move(segment));
  return table_status;
}

absl::Status FlightRecorder::Append(const v1::Event& event) {
  if (!current_) return absl::FailedPreconditionError("the flight recorder has no header yet, or is closed");
  table_.Track(event);
  ++events_received_;
  latest_ns_ = std::max(latest_ns_, event.ts_ns());
  Segment& segment = segments_.back();
  ++segment.events;
  if (absl::Status s = current_->Append(event); !s.ok()) return s;
  // The writer sized the event just now.
  max_event_bytes_ = std::max<size_t>(max_event_bytes_, static_cast<size_t>(event.GetCachedSize()) + 16);
  return RotateIfDue();
}

absl::Status FlightRecorder::RotateIfDue() {
  const Segment& segment = segments_.back();
  if (segment.events == 0) return absl::OkStatus();
  const bool due = options_.max_bytes != 0
                       ? current_->bytes_written() + batch_bytes_ + max_event_bytes_ > segment_bytes_
                       : latest_ns_ - segment.open_ns >= options_.max_span_ns / options_.segments;
  if (!due) return absl::OkStatus();
  absl::Status closed = current_->Close();
  segments_.back().bytes = current_->bytes_written();
  if (const v1::TraceWriteFailure* f = current_->failure()) MergeFailure(*f, &failed_, &failure_);
  current_.reset();
  if (!closed.ok()) return closed;
  if (absl::Status s = OpenSegment(); !s.ok()) return s;
  // Drop the oldest while the rest still holds what the bound asks for.
  for (;;) {
    bool drop = false;
    if (options_.max_bytes != 0) {
      drop = segments_.size() > options_.segments;
    } else {
      drop = segments_.size() > 2 && latest_ns_ - segments_[1].open_ns >= options_.max_span_ns;
    }
    if (!drop) break;
    ::unlink(segments_.front().path.c_str());
    events_rotated_out_ += segments_.front().events;
    segments_.pop_front();
  }
  return absl::OkStatus();
}

absl::Status FlightRecorder::Flush() {
  return current_ ? current_->Flush() : absl::OkStatus();
}

void FlightRecorder::CountLost(const v1::Event& event) {
  lost_.set_lost_events(lost_.lost_events() + 1);
  ++(*lost_.mutable_lost_by_kind())[EventKind(event)];
}

const v1::TraceWriteFailure* FlightRecorder::failure() const {
  bool failed = failed_;
  merged_ = failure_;
  if (current_ && current_->failure()) MergeFailure(*current_->failure(), &failed, &merged_);
  if (lost_.lost_events() != 0) {
    if (!failed) {
      // Events lost without a failed write of ours: the caller gave up.
      merged_.set_error("writing the flight recorder's ring failed");
      merged_.set_at_ns(MonotonicNs());
      failed = true;
    }
    merged_.set_lost_events(merged_.lost_events() + lost_.lost_events());
    for (const auto& [kind, n] : lost_.lost_by_kind()) (*merged_.mutable_lost_by_kind())[kind] += n;
  }
  return failed ? &merged_ : nullptr;
}

uint64_t FlightRecorder::ring_bytes() const {
  uint64_t total = 0;
  for (const Segment& segment : segments_) {
    struct stat st {};
    if (::stat(segment.path.c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

uint64_t FlightRecorder::window_events() const {
  uint64_t total = 0;
  for (const Segment& segment : segments_) total += segment.events;
  return total;
}

std::string FlightRecorder::DumpPath(uint32_t n) const {
  std::string stem = options_.output_path;
  if (absl::EndsWith(stem, ".gpuos")) stem.resize(stem.size() - 6);
  return absl::StrFormat("%s.dump-%d.gpuos", stem, n);
}

v1::TraceHeader FlightRecorder::WindowHeader(uint64_t start_ns, uint64_t end_ns, const std::string& reason) {
  const uint64_t recording_start = header_.start_clock().monotonic_ns();
  v1::TraceHeader header = header_;
  v1::FlightWindow* window = header.mutable_flight_window();
  window->set_start_ns(start_ns);
  window->set_end_ns(end_ns);
  *window->mutable_recording_start_clock() = header_.start_clock();
  window->set_events_recorded(events_received_);
  window->set_events_rotated_out(events_rotated_out_);
  window->set_size_limit_bytes(options_.max_bytes);
  window->set_duration_limit_ns(options_.max_span_ns);
  window->set_reason(reason);
  window->set_dump_index(++dumps_);
  if (start_ns > recording_start) {
    // The trace reads as the window: its clock starts where the window does.
    v1::ClockPair* clock = header.mutable_start_clock();
    clock->set_realtime_ns(clock->realtime_ns() + (start_ns - recording_start));
    clock->set_monotonic_ns(start_ns);
    if (header.has_attach() && header.attach().start_ns() < start_ns) header.mutable_attach()->set_start_ns(start_ns);
  }
  return header;
}

absl::Status FlightRecorder::CopySegments(uint64_t start_ns, TraceWriter& out, uint64_t* events) const {
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& segment = segments_[i];
    auto reader = TraceReader::Open(segment.path);
    if (!reader.ok()) return reader.status();
    // Every segment after the oldest repeats a table the oldest's already
    // gave (or the events since gave): only the oldest's is kept.
    uint64_t skip = i == 0 ? 0 : segment.table_events;
    uint64_t table_left = i == 0 ? segment.table_events : 0;
    absl::Status write_status;
    v1::Event retimed;
    absl::Status read_status = ForEachEvent(**reader, [&](const v1::Event& event) {
      if (!write_status.ok()) return;
      if (skip > 0) {
        --skip;
        return;
      }
      if (table_left > 0) {
        // The table stands at the window's start, not at the segment's.
        --table_left;
        retimed = event;
        retimed.set_ts_ns(start_ns);
        write_status = out.Append(retimed);
      } else {
        write_status = out.Append(event);
      }
      if (write_status.ok()) ++*events;
    });
    if (!write_status.ok()) return write_status;
    // A damaged segment ends its part early; the rest of the window follows.
    (void)read_status;
  }
  return absl::OkStatus();
}

absl::StatusOr<FlightRecorder::DumpResult> FlightRecorder::Dump(const std::string& path, v1::TraceTrailer trailer,
                                                               const std::string& reason) {
  if (!has_header_ || segments_.empty()) {
    return absl::FailedPreconditionError("the flight recorder has nothing to write yet");
  }
  if (current_) current_->Flush().IgnoreError();  // a failure is in failure()
  const Segment& oldest = segments_.front();
  const uint64_t recording_start = header_.start_clock().monotonic_ns();
  uint64_t start_ns = recording_start;
  // Since the oldest segment opened, every event is here.  Some of its
  // events may begin a little earlier (an off-CPU interval is written at its
  // end; CPUs and the shim deliver out of order): they stay, as they are.
  if (events_rotated_out_ != 0) start_ns = std::max(oldest.open_ns, recording_start);
  DumpResult result;
  result.path = path;
  result.start_ns = start_ns;
  result.end_ns = std::max(latest_ns_, start_ns);
  const v1::TraceHeader header = WindowHeader(result.start_ns, result.end_ns, reason);

  const std::string partial = path + ".partial";
  auto out = TraceWriter::Create(partial);
  if (!out.ok()) return out.status();
  auto fail = [&](absl::Status status) {
    (*out)->Close().IgnoreError();
    ::unlink(partial.c_str());
    return status;
  };
  if (absl::Status s = (*out)->WriteHeader(header); !s.ok()) return fail(s);
  if (absl::Status s = CopySegments(start_ns, **out, &result.events); !s.ok()) return fail(s);
  trailer.set_events_written(result.events);
  if (const v1::TraceWriteFailure* f = failure(); f != nullptr && !trailer.has_write_failure()) {
    *trailer.mutable_write_failure() = *f;
  }
  if (absl::Status s = (*out)->WriteTrailer(trailer); !s.ok()) return fail(s);
  if (options_.owner != static_cast<uid_t>(-1)) {
    if (::fchown((*out)->fd(), options_.owner, options_.group) != 0) {
      // Not fatal: root wrote it; the user may need sudo to remove it.
    }
  }
  if (absl::Status s = (*out)->Close(); !s.ok()) return fail(s);
  if (::rename(partial.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(partial.c_str());
    return ErrnoError(absl::StrCat("cannot rename ", partial, " to ", path), err);
  }
  last_dump_ = result;
  return result;
}

absl::Status FlightRecorder::WriteTrailer(const v1::TraceTrailer& trailer) {
  auto dumped = Dump(options_.output_path, trailer, end_reason_);
  absl::Status closed = Close();
  if (!dumped.ok()) return dumped.status();
  return closed;
}

absl::Status FlightRecorder::Close() {
  absl::Status status;
  if (current_) {
    status = current_->Close();
    current_.reset();
  }
  for (const Segment& segment : segments_) ::unlink(segment.path.c_str());
  segments_.clear();
  ::rmdir(options_.ring_dir.c_str());
  return status;
}

}  // namespace gpuos
