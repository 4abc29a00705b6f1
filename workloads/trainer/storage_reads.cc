// See storage_reads.h.
#include "storage_reads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/str_format.h"

namespace gpuos::trainer {
namespace {

constexpr int64_t kAlign = 4096;  // O_DIRECT: offsets, sizes and buffers aligned

struct FreeDeleter {
  void operator()(void* p) const { free(p); }
};

}  // namespace

absl::StatusOr<StorageReads> StorageReads::Open(const std::string& path, int64_t read_kib) {
  const int64_t read_bytes = read_kib * 1024;
  if (read_bytes <= 0 || read_bytes % kAlign != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("--read-kib %d: a positive multiple of 4", read_kib));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--read-direct %s: cannot open with O_DIRECT: %s", path, strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < read_bytes) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrFormat("--read-direct %s: smaller than one read of %d KiB", path, read_kib));
  }
  return StorageReads(fd, read_bytes, st.st_size);
}

StorageReads::StorageReads(StorageReads&& other) noexcept
    : fd_(other.fd_), read_bytes_(other.read_bytes_), file_bytes_(other.file_bytes_) {
  other.fd_ = -1;
}

StorageReads::~StorageReads() {
  if (fd_ >= 0) close(fd_);
}

bool StorageReads::ReadSample(int64_t sample_index) const {
  thread_local std::unique_ptr<void, FreeDeleter> buffer;
  thread_local int64_t buffer_bytes = 0;
  if (buffer_bytes < read_bytes_) {
    void* p = nullptr;
    if (posix_memalign(&p, kAlign, read_bytes_) != 0) return false;
    buffer.reset(p);
    buffer_bytes = read_bytes_;
  }
  const int64_t slots = file_bytes_ / read_bytes_;
  // Spread the samples over the file (a stride, not 0, 1, 2...: no
  // read-ahead helps), aligned.
  const int64_t slot = static_cast<int64_t>((static_cast<uint64_t>(sample_index) * 7919u) % slots);
  int64_t done = 0;
  while (done < read_bytes_) {
    const ssize_t n = pread(fd_, static_cast<char*>(buffer.get()) + done, read_bytes_ - done, slot * read_bytes_ + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += n;
  }
  return true;
}

}  // namespace gpuos::trainer
