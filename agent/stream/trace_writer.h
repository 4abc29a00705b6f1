// Writes a .gpuos file incrementally: the header first, then one framed
// EventBatch record whenever enough events are buffered, so that the trace
// of a recording that crashes or is killed stays readable up to its last
// complete record.  See record_framing.h for the byte layout.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuos_trace.pb.h"
#include "stream/event_sink.h"

namespace gpuos {

class TraceWriter : public EventSink {
 public:
  struct Options {
    // A batch is written out once it holds this many events or bytes.
    size_t max_batch_events = 4096;
    size_t max_batch_bytes = 1 << 20;
    // --max-size: no batch is written that would take the file past this
    // many bytes (0: no cap); the trailer is exempt, so it can say so.
    uint64_t max_file_bytes = 0;
  };

  // Creates (truncates) `path`.  The file is created with mode 0644.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Create(const std::string& path,
                                                             Options options);
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Create(const std::string& path) {
    return Create(path, Options());
  }
  ~TraceWriter() override;  // Flushes and closes; errors are lost, call Close() to see them.

  absl::Status WriteHeader(const v1::TraceHeader& header) override;
  // Buffers one event; writes the batch when it is full.
  absl::Status Append(const v1::Event& event) override;
  // Writes the buffered events now (no-op when none).
  absl::Status Flush() override;
  absl::Status WriteTrailer(const v1::TraceTrailer& trailer) override;
  // Flushes and closes the file.
  absl::Status Close() override;

  // Counts an event that the caller will not hand over after a failed write
  // (a recording stops writing at its first error), so the trailer can say
  // what the file is missing.
  void CountLost(const v1::Event& event) override;
  // The first failed write and every event lost since; null when none failed.
  const v1::TraceWriteFailure* failure() const override { return failed_ ? &failure_ : nullptr; }

  uint64_t events_written() const override { return events_written_; }
  uint64_t bytes_written() const { return bytes_written_; }
  int fd() const { return fd_; }
  // The file was unlinked (st_nlink 0) since it was created: the writer
  // then stops writing (Flush fails), the trace being unreachable.
  bool Removed() const override;

 private:
  TraceWriter(int fd, std::string path, Options options);
  absl::Status WriteRecord(const v1::Record& record);

  int fd_;
  std::string path_;
  Options options_;
  v1::Record pending_;  // holds the batch being filled
  size_t pending_bytes_ = 0;
  uint64_t events_written_ = 0;
  uint64_t bytes_written_ = 0;
  std::string scratch_;
  bool failed_ = false;
  v1::TraceWriteFailure failure_;
};

}  // namespace gpuos
