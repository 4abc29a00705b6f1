// See trace_completeness.h.
#include "stream/trace_completeness.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "stream/record_framing.h"
#include "stream/trace_reader.h"
#include "stream/text_repairing_parse.h"

namespace gpuos {

std::string IncompleteReason(const v1::TraceHeader& header, bool has_trailer, const v1::TraceTrailer& trailer) {
  if (!has_trailer) {
    return "no trailer: the recording did not end cleanly (the tracer was killed, or writing the file failed); "
           "the trace ends at its last complete record";
  }
  if (!trailer.has_write_failure()) return "";
  const v1::TraceWriteFailure& f = trailer.write_failure();
  std::vector<std::pair<std::string, uint64_t>> kinds(f.lost_by_kind().begin(), f.lost_by_kind().end());
  std::sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  const uint64_t start = header.start_clock().monotonic_ns();
  std::string when = f.at_ns() >= start && start != 0
                         ? absl::StrFormat(" %.3f s into the recording", (f.at_ns() - start) / 1e9)
                         : std::string();
  return absl::StrFormat(
      "writing the trace file failed%s (%s): %d events lost (%s); nothing recorded after that is in the file",
      when, f.error(), f.lost_events(),
      absl::StrJoin(kinds, ", ", [](std::string* out, const auto& kv) { absl::StrAppend(out, kv.first, " ", kv.second); }));
}

std::string FlightWindowNote(const v1::TraceHeader& header) {
  if (!header.has_flight_window()) return "";
  const v1::FlightWindow& w = header.flight_window();
  const uint64_t start = w.recording_start_clock().monotonic_ns();
  const double from = w.start_ns() >= start ? (w.start_ns() - start) / 1e9 : 0;
  const double to = w.end_ns() >= start ? (w.end_ns() - start) / 1e9 : 0;
  const uint64_t bytes = w.size_limit_bytes();
  std::string bound = bytes == 0            ? absl::StrFormat("a ring of %.0f s", w.duration_limit_ns() / 1e9)
                      : bytes < (1ull << 20) ? absl::StrFormat("a ring of %d KiB", bytes >> 10)
                                             : absl::StrFormat("a ring of %.1f MiB", bytes / 1048576.0);
  return absl::StrFormat(
      "flight-recorder window (%s): the last %.3f s of the recording, %.3f s to %.3f s after it started; "
      "%d earlier events rotated out and are not in this file; dumped by: %s",
      bound, to - from, from, to, w.events_rotated_out(), w.reason().empty() ? "request" : w.reason());
}

absl::StatusOr<std::string> IncompleteReasonOfFile(const std::string& path) {
  auto reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  const v1::TraceHeader header = (*reader)->header();
  const uint64_t first_frame = (*reader)->offset();
  reader->reset();

  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  // The last whole frame's offset: only it can be the trailer.
  uint64_t offset = first_frame;
  uint64_t last = UINT64_MAX;
  uint32_t last_length = 0;
  unsigned char frame[kFrameHeaderBytes];
  while (std::fseek(file, static_cast<long>(offset), SEEK_SET) == 0 &&
         std::fread(frame, 1, sizeof(frame), file) == sizeof(frame)) {
    const uint32_t length = frame[0] | frame[1] << 8 | frame[2] << 16 | static_cast<uint32_t>(frame[3]) << 24;
    if (length == 0 || length > kMaxRecordBytes) break;
    if (std::fseek(file, static_cast<long>(offset + kFrameHeaderBytes + length - 1), SEEK_SET) != 0) break;
    if (std::fgetc(file) == EOF) break;  // cut short
    last = offset;
    last_length = length;
    offset += kFrameHeaderBytes + length;
  }
  bool has_trailer = false;
  v1::TraceTrailer trailer;
  if (last != UINT64_MAX) {
    std::string payload(last_length, '\0');
    v1::Record record;
    if (std::fseek(file, static_cast<long>(last + kFrameHeaderBytes), SEEK_SET) == 0 &&
        std::fread(payload.data(), 1, payload.size(), file) == payload.size() && ParseRepairingText(payload, &record) &&
        record.has_trailer()) {
      has_trailer = true;
      trailer = record.trailer();
    }
  }
  std::fclose(file);
  return IncompleteReason(header, has_trailer, trailer);
}

}  // namespace gpuos
