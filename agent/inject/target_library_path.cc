// Making a library visible to a process in another mount namespace; see
// target_library_path.h.
#include "inject/target_library_path.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_format.h"

namespace gpuos::inject {
namespace {

absl::Status CopyFile(const std::string& from, const std::string& to) {
  int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return absl::UnavailableError(absl::StrFormat("%s: %s", from, strerror(errno)));
  const std::string temp = to + ".partial";
  int out = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0755);
  if (out < 0) {
    const int err = errno;
    close(in);
    return absl::UnavailableError(absl::StrFormat("%s: %s", temp, strerror(err)));
  }
  char buffer[65536];
  for (;;) {
    ssize_t n = read(in, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(in);
      close(out);
      unlink(temp.c_str());
      return absl::UnavailableError(absl::StrFormat("%s: %s", from, strerror(err)));
    }
    if (n == 0) break;
    if (write(out, buffer, static_cast<size_t>(n)) != n) {
      const int err = errno;
      close(in);
      close(out);
      unlink(temp.c_str());
      return absl::UnavailableError(absl::StrFormat("%s: %s", temp, strerror(err)));
    }
  }
  close(in);
  fchmod(out, 0755);
  if (close(out) != 0 || rename(temp.c_str(), to.c_str()) != 0) {
    const int err = errno;
    unlink(temp.c_str());
    return absl::UnavailableError(absl::StrFormat("%s: %s", to, strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> LibraryPathInTarget(pid_t pid, const std::string& library_path) {
  struct stat ours;
  if (stat(library_path.c_str(), &ours) != 0) {
    return absl::NotFoundError(
        absl::StrFormat("cannot read library %s: %s", library_path, strerror(errno)));
  }
  struct stat theirs;
  const std::string seen = absl::StrFormat("/proc/%d/root%s", pid, library_path);
  if (stat(seen.c_str(), &theirs) == 0 && theirs.st_dev == ours.st_dev &&
      theirs.st_ino == ours.st_ino) {
    return library_path;
  }
  // Named after the file's identity, so repeated injections reuse one copy.
  const size_t slash = library_path.rfind('/');
  const std::string base = library_path.substr(slash == std::string::npos ? 0 : slash + 1);
  const std::string name = absl::StrFormat("/tmp/gpuos-inject-%x-%x-%s", ours.st_ino,
                                           static_cast<uint64_t>(ours.st_mtime), base);
  const std::string copy = absl::StrFormat("/proc/%d/root%s", pid, name);
  struct stat existing;
  if (stat(copy.c_str(), &existing) == 0 && existing.st_size == ours.st_size) return name;
  if (absl::Status s = CopyFile(library_path, copy); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "library %s is not visible in pid %d's mount namespace and copying it into its /tmp "
        "failed (%s)",
        library_path, pid, s.message()));
  }
  return name;
}

}  // namespace gpuos::inject
