// ChromeJsonWriter: see chrome_json/chrome_json_writer.h.
#include "export/chrome_json/chrome_json_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "export/report/json_writer.h"

namespace gpuos {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<ChromeJsonWriter>> ChromeJsonWriter::Create(
    const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  return std::unique_ptr<ChromeJsonWriter>(new ChromeJsonWriter(fd, path));
}

ChromeJsonWriter::ChromeJsonWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  out_ = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
}

ChromeJsonWriter::~ChromeJsonWriter() {
  if (fd_ >= 0) close(fd_);
}

void ChromeJsonWriter::Str(std::string_view text) {
  out_.push_back('"');
  out_ += JsonEscape(text);
  out_.push_back('"');
}

void ChromeJsonWriter::Num(uint64_t value) { absl::StrAppend(&out_, value); }

void ChromeJsonWriter::Open(char phase, uint64_t ts, uint32_t pid, uint32_t tid) {
  if (!first_) out_ += ",\n";
  first_ = false;
  ++events_;
  out_ += "{\"ph\":\"";
  out_.push_back(phase);
  out_ += "\",\"ts\":";
  absl::StrAppend(&out_, ts / 1000, ".", absl::Dec(ts % 1000, absl::kZeroPad3));
  out_ += ",\"pid\":";
  Num(pid);
  out_ += ",\"tid\":";
  Num(tid);
}

void ChromeJsonWriter::Close() {
  out_.push_back('}');
  if (out_.size() >= kFlushBytes) Flush();
}

void ChromeJsonWriter::Metadata(const char* name, uint32_t pid, uint32_t tid,
                                std::string_view value) {
  if (!first_) out_ += ",\n";
  first_ = false;
  ++events_;
  out_ += "{\"ph\":\"M\",\"name\":\"";
  out_ += name;
  out_ += "\",\"pid\":";
  Num(pid);
  out_ += ",\"tid\":";
  Num(tid);
  out_ += ",\"args\":{\"name\":";
  Str(value);
  out_ += "}";
  Close();
}

void ChromeJsonWriter::DescribeTrack(uint64_t ts, const Track& track) {
  if (track.json_pid == kJsonGlobalPid && !global_named_) {
    global_named_ = true;
    Metadata("process_name", kJsonGlobalPid, 0, "gpuos-trace (whole trace)");
  }
  if (track.kind == TrackKind::kProcess && track.lane == 0) {
    Metadata("process_name", track.pid, track.pid, track.name);
  } else if (track.kind != TrackKind::kCounter) {
    Metadata("thread_name", track.json_pid, track.json_tid, track.name);
  }
}

void ChromeJsonWriter::NameAndCategory(const SliceEvent& event) {
  out_ += ",\"name\":";
  Str(event.name);
  out_ += ",\"cat\":\"";
  out_ += SliceCategoryName(event.category);
  out_ += "\"";
}

void ChromeJsonWriter::Args(const SliceEvent& event) {
  if (event.args.empty()) return;
  out_ += ",\"args\":{";
  bool first = true;
  for (const DebugArg& arg : event.args) {
    if (!first) out_.push_back(',');
    first = false;
    out_.push_back('"');
    out_ += arg.key;
    out_ += "\":";
    switch (arg.type) {
      case DebugArg::Type::kInt:
        absl::StrAppend(&out_, arg.int_value);
        break;
      case DebugArg::Type::kUint:
        absl::StrAppend(&out_, arg.uint_value);
        break;
      case DebugArg::Type::kPointer:
        absl::StrAppend(&out_, "\"0x", absl::Hex(arg.uint_value), "\"");
        break;
      case DebugArg::Type::kDouble:
        if (std::isfinite(arg.double_value)) {
          absl::StrAppend(&out_, arg.double_value);
        } else {
          out_ += "null";
        }
        break;
      case DebugArg::Type::kBool:
        out_ += arg.bool_value ? "true" : "false";
        break;
      case DebugArg::Type::kString:
        Str(arg.string_value);
        break;
    }
  }
  out_.push_back('}');
}

void ChromeJsonWriter::Flows(uint64_t ts, const Track& track, const SliceEvent& event) {
  // Written right after the slice's B event at the same time, so each binds
  // to that slice ("f" with bp:e binds to the enclosing slice).
  for (uint64_t id : event.flow_ids) {
    Open('s', ts, track.json_pid, track.json_tid);
    absl::StrAppend(&out_, ",\"name\":\"launch\",\"cat\":\"flow\",\"id\":\"0x", absl::Hex(id), "\"");
    Close();
  }
  for (uint64_t id : event.terminating_flow_ids) {
    Open('f', ts, track.json_pid, track.json_tid);
    absl::StrAppend(&out_, ",\"name\":\"launch\",\"cat\":\"flow\",\"bp\":\"e\",\"id\":\"0x",
                    absl::Hex(id), "\"");
    Close();
  }
}

void ChromeJsonWriter::BeginSlice(uint64_t ts, const Track& track, const SliceEvent& event) {
  Open('B', ts, track.json_pid, track.json_tid);
  NameAndCategory(event);
  Args(event);
  Close();
  Flows(ts, track, event);
}

void ChromeJsonWriter::EndSlice(uint64_t ts, const Track& track) {
  Open('E', ts, track.json_pid, track.json_tid);
  Close();
}

void ChromeJsonWriter::Instant(uint64_t ts, const Track& track, const SliceEvent& event) {
  Open('i', ts, track.json_pid, track.json_tid);
  NameAndCategory(event);
  out_ += track.kind == TrackKind::kProcess ? ",\"s\":\"p\"" : ",\"s\":\"t\"";
  Args(event);
  Close();
}

void ChromeJsonWriter::Counter(uint64_t ts, const Track& track, double value) {
  Open('C', ts, track.json_pid, 0);
  out_ += ",\"name\":";
  Str(track.name);
  out_ += ",\"args\":{\"value\":";
  if (std::isfinite(value)) {
    absl::StrAppend(&out_, value);
  } else {
    out_ += "0";
  }
  out_ += "}";
  Close();
}

void ChromeJsonWriter::Flush() {
  size_t done = 0;
  while (status_.ok() && done < out_.size()) {
    ssize_t n = write(fd_, out_.data() + done, out_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status_ = absl::InternalError(absl::StrCat("cannot write ", path_, ": ", strerror(errno)));
      break;
    }
    done += static_cast<size_t>(n);
  }
  out_.clear();
}

absl::Status ChromeJsonWriter::Finish() {
  out_ += "\n]}\n";
  Flush();
  if (fd_ >= 0) {
    if (close(fd_) != 0 && status_.ok()) {
      status_ = absl::InternalError(absl::StrCat("cannot write ", path_, ": ", strerror(errno)));
    }
    fd_ = -1;
  }
  return status_;
}

}  // namespace gpuos
