// The byte layout of a .gpuos file:
//
//   file   := magic record*
//   magic  := "GPUOSTRC" (8 bytes) u32 format_version (little endian)
//   record := u32 payload_length  u32 crc32(payload)  payload
//
// payload is a serialized gpuos.v1.Record; integers are little endian and
// crc32 is zlib's.  The first record holds the TraceHeader.  A frame whose
// length exceeds kMaxRecordBytes, whose CRC mismatches or whose payload does
// not parse is corruption; a frame cut short by end of file is truncation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuos {

inline constexpr char kFileMagic[8] = {'G', 'P', 'U', 'O', 'S', 'T', 'R', 'C'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kFileMagicBytes = 12;  // magic + format_version
inline constexpr size_t kFrameHeaderBytes = 8;  // length + crc32
inline constexpr uint32_t kMaxRecordBytes = 64u << 20;

// The 12 bytes every .gpuos file starts with.
std::string EncodeFileMagic();
// Appends length, crc32 and payload to `out`.
void AppendFrame(std::string_view payload, std::string* out);
uint32_t Crc32(std::string_view bytes);

}  // namespace gpuos
