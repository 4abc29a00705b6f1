// libFuzzer target: the .gpuos reader and every consumer of what it yields
// (report, dump, export; trace_consumers.h) on a file made from the input.
//
// Input: byte 0 chooses how the rest becomes a file.
//   even: the bytes are the file as is (magic, framing, CRCs, the header);
//   odd:  the rest is a list of records, each "u32 little-endian length,
//         payload" (a length past the end takes what is left); the file is
//         the magic and each payload framed with its correct CRC, so that
//         mutations reach the record parser and the analyses instead of
//         stopping at a CRC mismatch.  Corpus files of this form are what
//         make_trace_seed turns a real trace into.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "stream/record_framing.h"
#include "trace_consumers.h"

namespace {

std::string FramedFile(std::string_view records) {
  std::string file = gpuos::EncodeFileMagic();
  while (!records.empty()) {
    uint32_t length = 0;
    const size_t prefix = records.size() < 4 ? records.size() : 4;
    memcpy(&length, records.data(), prefix);
    records.remove_prefix(prefix);
    std::string_view payload = records.substr(0, length);
    records.remove_prefix(payload.size());
    gpuos::AppendFrame(payload, &file);
  }
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static gpuos_fuzz::MemoryFile* file = new gpuos_fuzz::MemoryFile();
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  file->Set((data[0] & 1) ? FramedFile(rest) : std::string(rest));
  gpuos_fuzz::ConsumeTrace(file->path());
  return 0;
}
