// Reads a .gpuos file record by record, in constant memory.  A truncated or
// corrupt file yields every complete record before the damage, then stops
// with a DataLoss status whose message names the byte offset.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class TraceReader {
 public:
  // Fails when the file cannot be opened or does not start with a valid
  // file magic and header record.
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path);
  ~TraceReader();

  const v1::TraceHeader& header() const { return header_; }

  // Reads the next record after the header.  Returns false at the end of
  // the file or at the first damaged record; status() tells which.
  bool Next(v1::Record* record);

  // OK after a clean end; DataLoss ("... at byte offset N ...") after
  // damage.  Records returned before the damage are valid.
  const absl::Status& status() const { return status_; }
  // Byte offset of the next record to read.
  uint64_t offset() const { return offset_; }
  uint64_t file_size() const { return file_size_; }

 private:
  TraceReader(std::FILE* file, std::string path, uint64_t file_size);
  bool ReadFrame(v1::Record* record);

  std::FILE* file_;
  std::string path_;
  uint64_t file_size_;
  uint64_t offset_ = 0;
  v1::TraceHeader header_;
  absl::Status status_;
  std::string buffer_;
};

// Calls `on_event` for every event of every batch, in file order.  Returns
// the reader's final status (events before damage have been delivered).
// `on_trailer` is called if the file has a trailer.
absl::Status ForEachEvent(TraceReader& reader,
                          const std::function<void(const v1::Event&)>& on_event,
                          const std::function<void(const v1::TraceTrailer&)>& on_trailer = {});

}  // namespace gpuos
