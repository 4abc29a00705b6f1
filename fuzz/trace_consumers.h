// What the fuzz targets do with a .gpuos file made from their input: every
// consumer a user can point at a file (report in text, JSON and HTML, dump,
// export, the completeness check), so that a crash anywhere in them on a
// hostile or damaged file is found.
#pragma once

#include <string>

namespace gpuos_fuzz {

// A file in memory (memfd) that the consumers open by path.
class MemoryFile {
 public:
  MemoryFile();
  ~MemoryFile();
  void Set(const std::string& bytes);
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Runs every consumer on the file at `path`; they may report errors, never crash.
void ConsumeTrace(const std::string& path);

}  // namespace gpuos_fuzz
