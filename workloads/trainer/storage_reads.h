// --read-direct FILE: each sample also reads --read-kib KiB of FILE with
// O_DIRECT, past the page cache, at an offset from its index: the stand-in
// for samples read from storage that the page cache does not hold (a data
// set larger than memory, or on a cold cache).  The file's content is not
// used; its reads are the cost.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpuos::trainer {

class StorageReads {
 public:
  // A clear error when FILE cannot be opened with O_DIRECT or is smaller
  // than one read.
  static absl::StatusOr<StorageReads> Open(const std::string& path, int64_t read_kib);
  StorageReads(StorageReads&& other) noexcept;
  StorageReads& operator=(StorageReads&&) = delete;
  ~StorageReads();

  // One sample's read (any thread or forked worker: pread, no shared offset).
  // False when the read failed.
  bool ReadSample(int64_t sample_index) const;

 private:
  StorageReads(int fd, int64_t read_bytes, int64_t file_bytes)
      : fd_(fd), read_bytes_(read_bytes), file_bytes_(file_bytes) {}
  int fd_;
  int64_t read_bytes_;
  int64_t file_bytes_;
};

}  // namespace gpuos::trainer
