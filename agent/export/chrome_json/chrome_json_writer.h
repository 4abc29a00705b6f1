// Writes the exported timeline as Chrome trace-event JSON (`--format json`):
// the older format chrome://tracing, Perfetto's legacy importer and many
// scripts read.  JSON knows only (pid, tid), so every track that is not a
// thread gets a made-up tid in its process (see timeline/track_table.h) and
// a thread_name record naming it.  Slices are B/E pairs, written in the
// nested order the emitter guarantees; flows are s/f pairs bound to the
// enclosing slices; counters are C events.  Times are microseconds with
// nanosecond decimals; flow ids and pointers are hex strings, because JSON
// readers lose integers above 2^53.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "export/timeline/timeline_sink.h"

namespace gpuos {

class ChromeJsonWriter : public TimelineSink {
 public:
  // Creates (truncates) `path`.
  static absl::StatusOr<std::unique_ptr<ChromeJsonWriter>> Create(const std::string& path);
  ~ChromeJsonWriter() override;

  void DescribeTrack(uint64_t ts, const Track& track) override;
  void BeginSlice(uint64_t ts, const Track& track, const SliceEvent& event) override;
  void EndSlice(uint64_t ts, const Track& track) override;
  void Instant(uint64_t ts, const Track& track, const SliceEvent& event) override;
  void Counter(uint64_t ts, const Track& track, double value) override;
  absl::Status Finish() override;

  uint64_t events() const { return events_; }

 private:
  ChromeJsonWriter(int fd, std::string path);
  // Starts an event object: {"ph":..,"ts":..,"pid":..,"tid":..
  void Open(char phase, uint64_t ts, uint32_t pid, uint32_t tid);
  void Close();
  void Metadata(const char* name, uint32_t pid, uint32_t tid, std::string_view value);
  void NameAndCategory(const SliceEvent& event);
  void Args(const SliceEvent& event);
  void Flows(uint64_t ts, const Track& track, const SliceEvent& event);
  void Str(std::string_view text);  // a quoted, escaped JSON string
  void Num(uint64_t value);
  void Flush();

  int fd_;
  std::string path_;
  std::string out_;
  bool first_ = true;
  bool global_named_ = false;
  uint64_t events_ = 0;
  absl::Status status_;
};

}  // namespace gpuos
