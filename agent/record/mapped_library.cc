// Finding a mapped library; see mapped_library.h.
#include "record/mapped_library.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace gpuos {
namespace {

// (device, inode) of a path, or nothing.
std::optional<std::pair<dev_t, ino_t>> FileId(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

}  // namespace

std::string FindMappedLibrary(pid_t pid, absl::string_view soname_prefix) {
  std::ifstream maps(absl::StrFormat("/proc/%d/maps", pid));
  std::string line;
  while (std::getline(maps, line)) {
    // address perms offset dev inode path; the path may hold spaces.
    size_t pos = 0;
    std::string range;
    for (int field = 0; field < 5 && pos != std::string::npos; ++field) {
      size_t end = line.find(' ', pos);
      if (field == 0) range = line.substr(pos, end - pos);
      pos = end == std::string::npos ? end : line.find_first_not_of(' ', end);
    }
    if (pos == std::string::npos || line[pos] != '/') continue;
    std::string path = line.substr(pos);
    bool deleted = absl::EndsWith(path, " (deleted)");
    if (deleted) path.resize(path.size() - strlen(" (deleted)"));
    absl::string_view base(path);
    base.remove_prefix(base.rfind('/') + 1);
    if (!absl::StartsWith(base, soname_prefix)) continue;

    // The path in maps is the process's view: another mount namespace or
    // root (a container) may hold a different file there, or none, and a
    // replaced library is only reachable through the mapping itself.
    std::string in_root = absl::StrFormat("/proc/%d/root%s", pid, path);
    if (!deleted) {
      auto theirs = FileId(in_root);
      if (theirs && FileId(path) == theirs) return path;
      if (theirs) return in_root;
    }
    std::string mapped = absl::StrFormat("/proc/%d/map_files/%s", pid, range);
    if (FileId(mapped)) return mapped;
  }
  return "";
}

}  // namespace gpuos
