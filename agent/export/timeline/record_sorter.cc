// RecordSorter: see timeline/record_sorter.h.
#include "export/timeline/record_sorter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/fd_write.h"

namespace gpuos {
namespace {

constexpr size_t kMinCapacity = 16;
// The most bytes one encoded record can take (every field a full varint).
constexpr size_t kMaxEncodedBytes = 128;
constexpr size_t kWriteChunkBytes = 1 << 20;
// Reading a run back: large enough to make the reads sequential, small
// enough that hundreds of runs fit the memory budget.
constexpr size_t kMaxRunReadBytes = 1 << 20;
constexpr size_t kMinRunReadBytes = 64 << 10;
constexpr size_t kRunReadBudgetBytes = 64 << 20;

char* PutVarint(char* p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  *p++ = static_cast<char>(value);
  return p;
}

const char* GetVarint(const char* p, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(*p++);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) break;
  }
  *value = result;
  return p;
}

// Layout: ts - previous ts, dur, ordinal, track, name, pid, kind, a mask of
// the nonzero payload words, then those words; all varints but kind and mask.
char* Encode(const TimelineRecord& r, uint64_t previous_ts, char* p) {
  p = PutVarint(p, r.ts - previous_ts);
  p = PutVarint(p, r.dur);
  p = PutVarint(p, r.ordinal);
  p = PutVarint(p, r.track);
  p = PutVarint(p, r.name);
  p = PutVarint(p, r.pid);
  *p++ = static_cast<char>(r.kind);
  char* mask = p++;
  uint8_t bits = 0;
  for (size_t i = 0; i < kRecordPayloadWords; ++i) {
    if (r.payload[i] != 0) {
      bits |= 1 << i;
      p = PutVarint(p, r.payload[i]);
    }
  }
  *mask = static_cast<char>(bits);
  return p;
}

const char* DecodeRecord(const char* p, uint64_t previous_ts, TimelineRecord* r) {
  uint64_t v;
  p = GetVarint(p, &v);
  r->ts = previous_ts + v;
  p = GetVarint(p, &r->dur);
  p = GetVarint(p, &r->ordinal);
  p = GetVarint(p, &v);
  r->track = static_cast<uint32_t>(v);
  p = GetVarint(p, &v);
  r->name = static_cast<uint32_t>(v);
  p = GetVarint(p, &v);
  r->pid = static_cast<uint32_t>(v);
  r->kind = static_cast<RecordKind>(*p++);
  const uint8_t bits = static_cast<uint8_t>(*p++);
  for (size_t i = 0; i < kRecordPayloadWords; ++i) {
    r->payload[i] = 0;
    if (bits & (1 << i)) p = GetVarint(p, &r->payload[i]);
  }
  return p;
}

absl::Status WriteSpill(int fd, const char* p, size_t size) {
  if (int err = WriteAll(fd, p, size); err != 0) {
    return absl::InternalError(absl::StrCat("cannot write a temporary sort file: ", strerror(err),
                                            " (set TMPDIR to a directory with more free space)"));
  }
  return absl::OkStatus();
}

}  // namespace

RecordSorter::RecordSorter(std::string temp_dir, size_t buffer_bytes)
    : temp_dir_(std::move(temp_dir)),
      capacity_(std::max(kMinCapacity,
                         buffer_bytes / (sizeof(TimelineRecord) + sizeof(SortKey)))) {
  buffer_.reserve(capacity_);
}

RecordSorter::~RecordSorter() {
  for (Run& run : runs_) {
    if (run.fd >= 0) close(run.fd);
  }
}

absl::Status RecordSorter::Add(const TimelineRecord& record) {
  if (buffer_.size() == capacity_) {
    absl::Status status = Spill();
    if (!status.ok()) return status;
  }
  buffer_.push_back(record);
  ++records_;
  return absl::OkStatus();
}

void RecordSorter::SortBuffer() {
  keys_.resize(buffer_.size());
  for (size_t i = 0; i < buffer_.size(); ++i) {
    const TimelineRecord& r = buffer_[i];
    keys_[i] = {r.ts, r.dur, r.ordinal, static_cast<uint32_t>(i)};
  }
  std::sort(keys_.begin(), keys_.end(), [](const SortKey& x, const SortKey& y) {
    if (x.ts != y.ts) return x.ts < y.ts;
    if (x.dur != y.dur) return x.dur > y.dur;
    return x.ordinal < y.ordinal;
  });
}

absl::Status RecordSorter::Spill() {
  SortBuffer();
  std::string path = absl::StrCat(temp_dir_, "/gpuos-export-run-XXXXXX");
  int fd = mkstemp(path.data());
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create a temporary sort file in ", temp_dir_,
                                            ": ", strerror(errno),
                                            " (set TMPDIR to a writable directory)"));
  }
  // Unlinked at once: the run disappears with the process, however it ends.
  unlink(path.c_str());
  runs_.emplace_back();
  Run& run = runs_.back();
  run.fd = fd;
  std::vector<char> chunk(kWriteChunkBytes + kMaxEncodedBytes);
  char* p = chunk.data();
  uint64_t previous_ts = 0;
  for (const SortKey& key : keys_) {
    const TimelineRecord& r = buffer_[key.index];
    p = Encode(r, previous_ts, p);
    previous_ts = r.ts;
    if (static_cast<size_t>(p - chunk.data()) >= kWriteChunkBytes) {
      absl::Status status = WriteSpill(fd, chunk.data(), p - chunk.data());
      if (!status.ok()) return status;
      run.unread += p - chunk.data();
      p = chunk.data();
    }
  }
  absl::Status status = WriteSpill(fd, chunk.data(), p - chunk.data());
  if (!status.ok()) return status;
  run.unread += p - chunk.data();
  if (lseek(fd, 0, SEEK_SET) != 0) {
    return absl::InternalError(absl::StrCat("cannot rewind a temporary sort file: ", strerror(errno)));
  }
  bytes_spilled_ += run.unread;
  buffer_.clear();
  return absl::OkStatus();
}

bool RecordSorter::Decode(Run& run) {
  if (run.end - run.pos < kMaxEncodedBytes && run.unread > 0) {
    // Keep the partial record at the end, then top the buffer up.
    const size_t keep = run.end - run.pos;
    std::memmove(run.bytes.data(), run.bytes.data() + run.pos, keep);
    run.pos = 0;
    run.end = keep;
    const size_t want = std::min<uint64_t>(run.unread, run.bytes.size() - keep);
    size_t got = 0;
    while (got < want) {
      ssize_t n = read(run.fd, run.bytes.data() + keep + got, want - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        status_ = absl::InternalError(absl::StrCat(
            "cannot read back a temporary sort file: ",
            n == 0 ? "unexpected end of file" : strerror(errno)));
        return false;
      }
      got += static_cast<size_t>(n);
    }
    run.end += got;
    run.unread -= got;
  }
  if (run.pos >= run.end) return false;
  const char* p = DecodeRecord(run.bytes.data() + run.pos, run.previous_ts, &run.head);
  run.pos = static_cast<size_t>(p - run.bytes.data());
  run.previous_ts = run.head.ts;
  return true;
}

absl::Status RecordSorter::StartMerge() {
  merging_ = true;
  // The last buffer stays in memory as one more source.
  SortBuffer();
  buffer_pos_ = 0;
  heap_.clear();
  const size_t per_run =
      runs_.empty() ? 0
                    : std::clamp(kRunReadBudgetBytes / runs_.size(), kMinRunReadBytes,
                                 kMaxRunReadBytes);
  for (size_t i = 0; i < runs_.size(); ++i) {
    runs_[i].bytes.resize(per_run);
    if (Decode(runs_[i])) heap_.push_back(static_cast<uint32_t>(i));
    if (!status_.ok()) return status_;
  }
  if (!keys_.empty()) heap_.push_back(static_cast<uint32_t>(runs_.size()));
  auto after = [this](uint32_t x, uint32_t y) { return RecordBefore(Head(y), Head(x)); };
  std::make_heap(heap_.begin(), heap_.end(), after);
  return absl::OkStatus();
}

const TimelineRecord& RecordSorter::Head(size_t source) const {
  if (source == runs_.size()) return buffer_[keys_[buffer_pos_].index];
  return runs_[source].head;
}

bool RecordSorter::Advance(size_t source) {
  if (source == runs_.size()) return ++buffer_pos_ < keys_.size();
  return Decode(runs_[source]);
}

bool RecordSorter::Next(TimelineRecord* record) {
  if (!merging_ || heap_.empty() || !status_.ok()) return false;
  auto after = [this](uint32_t x, uint32_t y) { return RecordBefore(Head(y), Head(x)); };
  std::pop_heap(heap_.begin(), heap_.end(), after);
  const uint32_t source = heap_.back();
  *record = Head(source);
  if (Advance(source)) {
    std::push_heap(heap_.begin(), heap_.end(), after);
  } else {
    heap_.pop_back();
  }
  return status_.ok();
}

}  // namespace gpuos
