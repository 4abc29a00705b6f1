// Text from processes and the kernel made valid UTF-8 before it goes into a
// trace: the trace's text fields are proto3 `string`s, and proto3 refuses to
// parse one that is not valid UTF-8, so a single bad name (a comm cut at 15
// bytes in the middle of a character, a Latin-1 NVTX range name) would make
// its whole batch and every record after it unreadable.  Header-only: the
// CUDA shim, which links nothing of the agent, uses it too.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuos {

// Length of the well-formed UTF-8 sequence starting at bytes[i] (Unicode
// table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF), or 0
// when the byte there does not start one.
inline size_t Utf8SequenceLengthAt(std::string_view bytes, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char b0 = at(i);
  const size_t left = bytes.size() - i;
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < left && at(i + k) >= lo && at(i + k) <= hi;
  };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2) ? 3 : 0;
  if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (b0 == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (b0 == 0xF0) return cont(1, 0x90, 0xBF) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

inline bool IsValidUtf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = Utf8SequenceLengthAt(bytes, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// `bytes` with every byte that does not belong to a well-formed sequence
// replaced by U+FFFD; valid text comes back unchanged.
inline std::string ValidUtf8(std::string_view bytes) {
  if (IsValidUtf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = Utf8SequenceLengthAt(bytes, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(bytes.data() + i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace gpuos
