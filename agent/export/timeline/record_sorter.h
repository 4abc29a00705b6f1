// Puts TimelineRecords in time order without holding them all: records are
// buffered up to a byte budget, each full buffer is sorted and spilled to an
// unlinked temporary file (a "run"), and the runs are k-way merged at the
// end.  CUDA activity reaches a trace seconds after the OS events around it,
// and an off-CPU interval is stamped with its start but written at its end;
// an external merge is correct however late a record arrives, which a
// bounded reorder window is not.
//
// Runs are written compactly (time deltas and fields as varints, zero
// payload words left out): about a third of a record's in-memory size,
// which is what keeps the disk traffic, the export's main cost, down.
// Memory: the budget, a sort index of a third of it, and one read buffer
// per run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "export/timeline/timeline_record.h"

namespace gpuos {

class RecordSorter {
 public:
  // Runs go to unlinked files in `temp_dir`; `buffer_bytes` bounds the
  // in-memory buffer (at least a few records).
  RecordSorter(std::string temp_dir, size_t buffer_bytes);
  ~RecordSorter();
  RecordSorter(const RecordSorter&) = delete;
  RecordSorter& operator=(const RecordSorter&) = delete;

  absl::Status Add(const TimelineRecord& record);
  // Ends the adding; Next() then returns the records in RecordBefore order.
  absl::Status StartMerge();
  // False at the end or on a read error (see status()).
  bool Next(TimelineRecord* record);
  const absl::Status& status() const { return status_; }

  size_t runs_spilled() const { return runs_.size(); }
  uint64_t bytes_spilled() const { return bytes_spilled_; }
  uint64_t records() const { return records_; }

 private:
  // Sorting moves these, not the records.
  struct SortKey {
    uint64_t ts;
    uint64_t dur;
    uint64_t ordinal;
    uint32_t index;  // into buffer_
  };
  struct Run {
    int fd = -1;
    uint64_t unread = 0;  // bytes of the file not yet read
    std::vector<char> bytes;
    size_t pos = 0;
    size_t end = 0;
    uint64_t previous_ts = 0;
    TimelineRecord head;
  };
  void SortBuffer();
  absl::Status Spill();
  bool Decode(Run& run);  // the run's next record into run.head
  const TimelineRecord& Head(size_t source) const;
  bool Advance(size_t source);  // false when the source is exhausted

  std::string temp_dir_;
  size_t capacity_;  // records in the in-memory buffer
  std::vector<TimelineRecord> buffer_;
  std::vector<SortKey> keys_;
  std::vector<Run> runs_;
  // Merge state: sources are the runs, then (index runs_.size()) the buffer.
  std::vector<uint32_t> heap_;
  size_t buffer_pos_ = 0;
  bool merging_ = false;
  uint64_t bytes_spilled_ = 0;
  uint64_t records_ = 0;
  absl::Status status_;
};

}  // namespace gpuos
