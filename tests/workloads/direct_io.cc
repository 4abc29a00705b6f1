// A known amount of direct block I/O, for recording_block_io_test: in a
// thread of its own, writes `--requests` blocks of `--bytes` each with
// O_DIRECT to a file in `--dir` (which must be on a block device: tmpfs has
// no block I/O), one synchronous request at a time, then reads them back
// the same way, and reports the thread's id and the kernel's own I/O
// accounting of it (/proc/self/task/TID/io):
//   tid=T write_bytes=W read_bytes=R requests=N bytes=B
// Exits 77 with "odirect refused: ..." on stderr when the file system
// refuses O_DIRECT.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace {

struct Options {
  std::string dir = ".";
  long requests = 16;
  long bytes = 64 * 1024;
};

long IoField(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  long v = -1;
  while (in >> k >> v) {
    if (k == key + ":") return v;
  }
  return -1;
}

// The file, made and sized here, in the main thread: creating and sizing
// it dirties directory and metadata blocks, which the kernel counts as the
// writing thread's write_bytes though no request of that thread carries
// them.  An fd, or -exit code.
int MakeFile(const Options& o) {
  const std::string path = o.dir + "/direct_io.dat";
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) {
    fprintf(stderr, "odirect refused: %s: %s\n", path.c_str(), strerror(errno));
    return errno == EINVAL ? -77 : -1;
  }
  unlink(path.c_str());  // gone with the fd
  // Allocated up front: the writes then change no file size.
  if (posix_fallocate(fd, 0, o.requests * o.bytes) != 0) {
    fprintf(stderr, "cannot allocate %s\n", path.c_str());
    return -1;
  }
  return fd;
}

// The requests, in the worker thread; returns the process exit code.
int Transfer(const Options& o, int fd) {
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, static_cast<size_t>(o.bytes)) != 0) return 1;
  memset(buf, 0x5a, static_cast<size_t>(o.bytes));
  for (long i = 0; i < o.requests; ++i) {
    if (pwrite(fd, buf, o.bytes, i * o.bytes) != o.bytes) {
      fprintf(stderr, "odirect refused: write: %s\n", strerror(errno));
      return errno == EINVAL ? 77 : 1;
    }
  }
  for (long i = 0; i < o.requests; ++i) {
    if (pread(fd, buf, o.bytes, i * o.bytes) != o.bytes) {
      fprintf(stderr, "read: %s\n", strerror(errno));
      return 1;
    }
  }
  free(buf);
  const long tid = syscall(SYS_gettid);
  const std::string io = "/proc/self/task/" + std::to_string(tid) + "/io";
  printf("tid=%ld write_bytes=%ld read_bytes=%ld requests=%ld bytes=%ld\n", tid,
         IoField(io, "write_bytes"), IoField(io, "read_bytes"), o.requests, o.bytes);
  fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--dir") o.dir = argv[i + 1];
    else if (flag == "--requests") o.requests = atol(argv[i + 1]);
    else if (flag == "--bytes") o.bytes = atol(argv[i + 1]);
  }
  if (o.requests <= 0 || o.bytes <= 0 || o.bytes % 4096 != 0) {
    fprintf(stderr, "usage: direct_io [--dir D] [--requests N] [--bytes B (a multiple of 4096)]\n");
    return 2;
  }
  // A thread of its own: its I/O accounting starts at zero, untouched by
  // the loading of this program.
  const int fd = MakeFile(o);
  if (fd < 0) return -fd;
  int code = 1;
  std::thread worker([&] { code = Transfer(o, fd); });
  worker.join();
  close(fd);
  return code;
}
