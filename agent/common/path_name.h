// The last component of a path ("python3" for "/usr/bin/python3").
#pragma once

#include <string>

namespace gpuos {

inline std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace gpuos
