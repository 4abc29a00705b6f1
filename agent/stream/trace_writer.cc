// Writes a .gpuos file: magic at Create, then one framed record per header,
// event batch and trailer, each handed to write(2) whole so that a recorder
// that is killed leaves a file that ends at (or just after) a record boundary.
#include "stream/trace_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fd_write.h"
#include "common/monotonic_clock.h"
#include "stream/record_framing.h"

namespace gpuos {
namespace {

// Bytes a repeated message field adds around each element: one tag byte and
// a varint length of at most 5 bytes.  Counting the worst case keeps the
// batch estimate an upper bound, so a batch never outgrows kMaxRecordBytes.
constexpr size_t kPerEventOverhead = 6;
// Room for the batch's own tag and length inside the Record.
constexpr size_t kRecordOverhead = 16;

// Writes all of `data`, retrying after signals and short writes.  Returns the
// errno of the failure, or 0.
// "off_cpu", "gpu_kernel": the payload's field name.
std::string EventKind(const v1::Event& event) {
  const auto* field = v1::Event::descriptor()->FindFieldByNumber(event.payload_case());
  return field != nullptr ? field->name() : "unknown";
}

}  // namespace

void TraceWriter::CountLost(const v1::Event& event) {
  failure_.set_lost_events(failure_.lost_events() + 1);
  ++(*failure_.mutable_lost_by_kind())[EventKind(event)];
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path,
                                                                 Options options) {
  if (options.max_batch_events == 0) options.max_batch_events = 1;
  // Batches small beside a size cap, so the file fills it to within 1/16.
  if (options.max_file_bytes != 0) {
    options.max_batch_bytes = std::min<size_t>(options.max_batch_bytes, std::max<uint64_t>(4096, options.max_file_bytes / 16));
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrFormat("cannot create trace file %s: %s", path, strerror(err)));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(fd, path, options));
  // The magic goes out at once so that even a file that never got its header
  // is recognisable as an (unfinished) trace.
  std::string magic = EncodeFileMagic();
  if (int err = WriteAll(fd, magic.data(), magic.size()); err != 0) {
    ::close(fd);
    writer->fd_ = -1;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrFormat("cannot write trace file %s: %s", path, strerror(err)));
  }
  writer->bytes_written_ = magic.size();
  return writer;
}

TraceWriter::TraceWriter(int fd, std::string path, Options options)
    : fd_(fd), path_(std::move(path)), options_(options) {}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0) Close().IgnoreError();
}

// The header must be the file's first record, so a writer's state is told by
// its size: bytes_written_ == magic size means no header yet.  (The header
// file leaves no room for a separate flag, and the size says it exactly.)
absl::Status TraceWriter::WriteHeader(const v1::TraceHeader& header) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trace file %s is closed; cannot write its header", path_));
  }
  if (bytes_written_ != kFileMagicBytes) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trace file %s already has a header", path_));
  }
  v1::Record record;
  *record.mutable_header() = header;
  // The file's format version is the writer's to state, not the caller's.
  record.mutable_header()->set_format_version(kFormatVersion);
  return WriteRecord(record);
}

absl::Status TraceWriter::Append(const v1::Event& event) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trace file %s is closed; cannot append events", path_));
  }
  if (bytes_written_ == kFileMagicBytes) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trace file %s: write the header before events", path_));
  }
  const size_t event_bytes = event.ByteSizeLong() + kPerEventOverhead;
  const size_t hard_limit = kMaxRecordBytes - kRecordOverhead;
  if (event_bytes > hard_limit) {
    return absl::InvalidArgumentError(
        absl::StrFormat("event of %d bytes is larger than a trace record may be (%d bytes)",
                        event_bytes, hard_limit));
  }
  // Flush first if this event would push the batch over the frame limit, so
  // no batch is ever unreadable.
  if (pending_.batch().events_size() > 0 && pending_bytes_ + event_bytes > hard_limit) {
    if (absl::Status status = Flush(); !status.ok()) return status;
  }
  *pending_.mutable_batch()->add_events() = event;
  pending_bytes_ += event_bytes;
  // Counted when accepted, so a trailer filled from events_written() before
  // WriteTrailer() (which flushes) includes the buffered events.  A failed
  // flush subtracts the events it lost.
  ++events_written_;
  if (static_cast<size_t>(pending_.batch().events_size()) >= options_.max_batch_events ||
      pending_bytes_ >= options_.max_batch_bytes) {
    return Flush();
  }
  return absl::OkStatus();
}

absl::Status TraceWriter::Flush() {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trace file %s is closed; cannot flush", path_));
  }
  const int events = pending_.has_batch() ? pending_.batch().events_size() : 0;
  if (events == 0) return absl::OkStatus();
  absl::Status status =
      options_.max_file_bytes != 0 && bytes_written_ + kFrameHeaderBytes + pending_.ByteSizeLong() > options_.max_file_bytes
          ? absl::ResourceExhaustedError(absl::StrFormat("the file size cap (--max-size) of %d bytes is reached",
                                                         options_.max_file_bytes))
      : Removed() ? absl::FailedPreconditionError(absl::StrFormat("%s was removed while recording", path_))
                  : WriteRecord(pending_);
  if (!status.ok()) {
    if (!failed_) {
      failed_ = true;
      failure_.set_error(std::string(status.message()));
      failure_.set_at_ns(MonotonicNs());
    }
    for (const v1::Event& event : pending_.batch().events()) CountLost(event);
  }
  // The batch is dropped even when writing failed: keeping it would let
  // memory grow without bound while the disk stays full.
  // Clear() keeps the allocated Event objects for reuse by the next batch,
  // which bounds memory by one batch.
  pending_.mutable_batch()->Clear();
  pending_bytes_ = 0;
  if (!status.ok()) {
    events_written_ -= static_cast<uint64_t>(events);
    return absl::Status(status.code(),
                        absl::StrCat(status.message(), " (", events, " events lost)"));
  }
  return absl::OkStatus();
}

// Writing on into a file nobody can open any more would only fill the disk
// until the recording ends, and then lose everything: a removed file is a
// failed write.
bool TraceWriter::Removed() const {
  struct stat st {};
  return fstat(fd_, &st) == 0 && st.st_nlink == 0;
}

absl::Status TraceWriter::WriteTrailer(const v1::TraceTrailer& trailer) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trace file %s is closed; cannot write its trailer", path_));
  }
  if (bytes_written_ == kFileMagicBytes) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trace file %s: write the header before the trailer", path_));
  }
  if (absl::Status status = Flush(); !status.ok()) return status;
  v1::Record record;
  *record.mutable_trailer() = trailer;
  return WriteRecord(record);
}

absl::Status TraceWriter::Close() {
  if (fd_ < 0) return absl::OkStatus();  // closing twice is harmless
  absl::Status status = Flush();
  // No retry on EINTR: Linux releases the descriptor even then, and a retry
  // could close a descriptor another thread has just opened.
  if (::close(fd_) != 0 && errno != EINTR && status.ok()) {
    int err = errno;
    status = absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrFormat("closing trace file %s: %s", path_, strerror(err)));
  }
  fd_ = -1;
  return status;
}

absl::Status TraceWriter::WriteRecord(const v1::Record& record) {
  // Frame in place: reserve the 8 header bytes, serialize after them, then
  // fill in length and CRC.  One buffer, one write(2) per record.
  scratch_.assign(kFrameHeaderBytes, '\0');
  if (!record.AppendToString(&scratch_)) {
    return absl::InternalError(absl::StrFormat("trace file %s: cannot serialize a record", path_));
  }
  const size_t payload_size = scratch_.size() - kFrameHeaderBytes;
  if (payload_size > kMaxRecordBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("trace file %s: record of %d bytes exceeds the %d byte limit", path_,
                        payload_size, kMaxRecordBytes));
  }
  const uint32_t length = static_cast<uint32_t>(payload_size);
  const uint32_t crc = Crc32(std::string_view(scratch_).substr(kFrameHeaderBytes, payload_size));
  for (int i = 0; i < 4; ++i) {
    scratch_[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    scratch_[4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  }
  if (int err = WriteAll(fd_, scratch_.data(), scratch_.size()); err != 0) {
    // Cut off any partial frame so the file still ends at a record boundary
    // and later records (if the disk recovers) stay readable.
    if (::ftruncate(fd_, static_cast<off_t>(bytes_written_)) == 0) {
      ::lseek(fd_, static_cast<off_t>(bytes_written_), SEEK_SET);
    }
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrFormat("writing trace file %s: %s", path_, strerror(err)));
  }
  bytes_written_ += scratch_.size();
  // A huge record would otherwise pin its buffer for the writer's lifetime.
  if (scratch_.capacity() > 2 * (options_.max_batch_bytes + kFrameHeaderBytes)) {
    std::string().swap(scratch_);
  }
  return absl::OkStatus();
}

}  // namespace gpuos
