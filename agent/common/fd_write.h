// Writing a whole buffer to a file descriptor, through short writes and
// EINTR.  Only write(2): safe between fork and exec too.
#pragma once

#include <errno.h>
#include <unistd.h>

#include <cstddef>

namespace gpuos {

// 0 when every byte was written, else the errno of the failed write (EIO
// for a write of 0 bytes, which would otherwise spin).
inline int WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace gpuos
