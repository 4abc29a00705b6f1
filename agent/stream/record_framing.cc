// Encoding of the .gpuos byte layout described in record_framing.h: the file
// magic and the length + CRC framing around each serialized Record.
#include "stream/record_framing.h"

#include <zlib.h>

namespace gpuos {
namespace {

// The format is little endian on every host, so bytes are placed one by one
// rather than memcpy'd from a native integer.
void AppendLittleEndian32(uint32_t value, std::string* out) {
  char bytes[4] = {static_cast<char>(value & 0xff), static_cast<char>((value >> 8) & 0xff),
                   static_cast<char>((value >> 16) & 0xff),
                   static_cast<char>((value >> 24) & 0xff)};
  out->append(bytes, sizeof(bytes));
}

}  // namespace

std::string EncodeFileMagic() {
  std::string magic(kFileMagic, sizeof(kFileMagic));
  AppendLittleEndian32(kFormatVersion, &magic);
  return magic;
}

void AppendFrame(std::string_view payload, std::string* out) {
  out->reserve(out->size() + kFrameHeaderBytes + payload.size());
  AppendLittleEndian32(static_cast<uint32_t>(payload.size()), out);
  AppendLittleEndian32(Crc32(payload), out);
  out->append(payload.data(), payload.size());
}

uint32_t Crc32(std::string_view bytes) {
  // crc32_z takes a size_t length, so no 4 GiB truncation of the count.
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

}  // namespace gpuos
