// Reads a .gpuos file frame by frame through stdio's buffer.  Every length
// read from the file is checked against kMaxRecordBytes and against what the
// file still holds before anything is allocated, so no input, however
// damaged, makes the reader allocate more than one record's worth.
#include "stream/trace_reader.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "stream/record_framing.h"
#include "stream/text_repairing_parse.h"

namespace gpuos {
namespace {

uint32_t LoadLittleEndian32(const unsigned char* bytes) {
  return static_cast<uint32_t>(bytes[0]) | (static_cast<uint32_t>(bytes[1]) << 8) |
         (static_cast<uint32_t>(bytes[2]) << 16) | (static_cast<uint32_t>(bytes[3]) << 24);
}

// Reads up to `size` bytes, retrying short reads; returns how many arrived.
size_t ReadUpTo(std::FILE* file, void* data, size_t size) {
  size_t total = 0;
  while (total < size) {
    size_t n = std::fread(static_cast<char*>(data) + total, 1, size - total, file);
    if (n == 0) break;  // end of file or a read error; the caller reports both
    total += n;
  }
  return total;
}

std::string ReadFailure(std::FILE* file) {
  return std::ferror(file) ? absl::StrCat("read error: ", strerror(errno)) : std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  // "e": O_CLOEXEC, so children the tool starts don't inherit the trace.
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (file == nullptr) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrFormat("cannot open trace %s: %s", path, strerror(err)));
  }
  struct stat st;
  if (fstat(fileno(file), &st) != 0) {
    int err = errno;
    std::fclose(file);
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrFormat("cannot stat trace %s: %s", path, strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    std::fclose(file);
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not a regular file, so not a gpuos-trace file", path));
  }
  // From here the reader owns the FILE and its destructor closes it.
  std::unique_ptr<TraceReader> reader(
      new TraceReader(file, path, static_cast<uint64_t>(st.st_size)));
  if (st.st_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is empty: the recording wrote nothing", path));
  }

  unsigned char magic[kFileMagicBytes];
  size_t got = ReadUpTo(file, magic, sizeof(magic));
  if (got < sizeof(kFileMagic) || memcmp(magic, kFileMagic, sizeof(kFileMagic)) != 0) {
    if (std::ferror(file)) {
      return absl::DataLossError(
          absl::StrFormat("cannot read trace %s: %s", path, ReadFailure(file)));
    }
    if (got < sizeof(kFileMagic) && got > 0 && memcmp(magic, kFileMagic, got) == 0) {
      return absl::DataLossError(absl::StrFormat(
          "%s: file ends inside its %d-byte magic (%d bytes)", path, kFileMagicBytes, got));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not a gpuos-trace file (no GPUOSTRC magic)", path));
  }
  if (got < kFileMagicBytes) {
    return absl::DataLossError(absl::StrFormat("%s: file ends inside its %d-byte magic (%d bytes)",
                                               path, kFileMagicBytes, got));
  }
  const uint32_t version = LoadLittleEndian32(magic + sizeof(kFileMagic));
  if (version != kFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: unsupported format version %d (this gpuos-trace reads version %d)",
                        path, version, kFormatVersion));
  }
  reader->offset_ = kFileMagicBytes;

  if (reader->offset_ == reader->file_size_) {
    return absl::DataLossError(absl::StrFormat(
        "%s has no header record (the recording stopped right after creating it)", path));
  }
  v1::Record record;
  if (!reader->ReadFrame(&record)) {
    if (reader->status_.ok()) {  // the file shrank after fstat
      return absl::DataLossError(absl::StrFormat("%s has no header record", path));
    }
    return absl::DataLossError(
        absl::StrFormat("%s: damaged header record: %s", path,
                        absl::StripPrefix(reader->status_.message(), absl::StrCat(path, ": "))));
  }
  if (!record.has_header()) {
    return absl::DataLossError(absl::StrFormat(
        "%s: damaged header record: the first record at byte offset %d is not a header", path,
        kFileMagicBytes));
  }
  reader->header_ = std::move(*record.mutable_header());
  return reader;
}

TraceReader::TraceReader(std::FILE* file, std::string path, uint64_t file_size)
    : file_(file), path_(std::move(path)), file_size_(file_size) {}

TraceReader::~TraceReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool TraceReader::Next(v1::Record* record) {
  if (!status_.ok()) return false;  // stays stopped at the first damage
  return ReadFrame(record);
}

// Reads one frame at offset_.  On success advances offset_ past it; on
// damage sets status_ (naming the frame's offset) and leaves offset_ at the
// frame, so offset() tells where the good part of the file ends.
bool TraceReader::ReadFrame(v1::Record* record) {
  const uint64_t frame_offset = offset_;
  auto damage = [&](const std::string& what) {
    status_ = absl::DataLossError(
        absl::StrFormat("%s: frame at byte offset %d: %s", path_, frame_offset, what));
    return false;
  };

  unsigned char frame_header[kFrameHeaderBytes];
  size_t got = ReadUpTo(file_, frame_header, sizeof(frame_header));
  if (got == 0 && !std::ferror(file_)) {
    return false;  // a clean end: the file stops at a record boundary
  }
  if (got < sizeof(frame_header)) {
    if (std::ferror(file_)) return damage(ReadFailure(file_));
    return damage(
        absl::StrFormat("truncated frame header (%d of %d bytes)", got, kFrameHeaderBytes));
  }
  const uint32_t length = LoadLittleEndian32(frame_header);
  const uint32_t stored_crc = LoadLittleEndian32(frame_header + 4);
  if (length > kMaxRecordBytes) {
    return damage(
        absl::StrFormat("record length %d over the %d-byte limit", length, kMaxRecordBytes));
  }
  if (length == 0) {
    // A writer never frames an empty record; zeros here are what a file
    // system leaves after a crash in blocks it had allocated but not written.
    return damage("zero-length frame (zero-filled region?)");
  }
  const uint64_t payload_offset = frame_offset + kFrameHeaderBytes;
  uint64_t left = file_size_ > payload_offset ? file_size_ - payload_offset : 0;
  if (length > left) {
    // The file may have grown since Open (a recording still in progress).
    struct stat st;
    if (fstat(fileno(file_), &st) == 0 && static_cast<uint64_t>(st.st_size) > file_size_) {
      file_size_ = static_cast<uint64_t>(st.st_size);
      left = file_size_ > payload_offset ? file_size_ - payload_offset : 0;
    }
  }
  if (length > left) {
    return damage(absl::StrFormat("truncated payload (needs %d bytes, %d left)", length, left));
  }
  buffer_.resize(length);
  got = ReadUpTo(file_, buffer_.data(), length);
  if (got < length) {
    if (std::ferror(file_)) return damage(ReadFailure(file_));
    return damage(absl::StrFormat("truncated payload (needs %d bytes, %d left)", length, got));
  }
  const uint32_t crc = Crc32(buffer_);
  if (crc != stored_crc) {
    return damage(absl::StrFormat("CRC mismatch (stored %08x, computed %08x)", stored_crc, crc));
  }
  if (!ParseRepairingText(buffer_, record)) {
    return damage(absl::StrFormat("payload of %d bytes does not parse as a record", length));
  }
  // One unusually large record should not pin its buffer for the rest of the
  // read; ordinary batches (about 1 MiB) keep theirs for reuse.
  if (buffer_.capacity() > (8u << 20)) std::string().swap(buffer_);
  offset_ = payload_offset + length;
  return true;
}

absl::Status ForEachEvent(TraceReader& reader,
                          const std::function<void(const v1::Event&)>& on_event,
                          const std::function<void(const v1::TraceTrailer&)>& on_trailer) {
  // One Record reused across batches: protobuf keeps the parsed Event objects
  // for the next batch, so memory stays at one batch.
  v1::Record record;
  while (reader.Next(&record)) {
    if (record.has_batch()) {
      if (on_event) {
        for (const v1::Event& event : record.batch().events()) on_event(event);
      }
    } else if (record.has_trailer()) {
      if (on_trailer) on_trailer(record.trailer());
    }
    // Other kinds (a newer writer's) carry no events; skip them.
  }
  return reader.status();
}

}  // namespace gpuos
