// Trace -> JSON lines; see event_dump.h.
#include "export/event_dump.h"

#include <google/protobuf/util/json_util.h>

#include "stream/trace_reader.h"

namespace gpuos {

absl::Status DumpTraceAsJsonLines(const std::string& path, std::ostream& out) {
  auto reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string line;
  auto write = [&](const google::protobuf::Message& message, const char* key) {
    line.clear();
    (void)google::protobuf::util::MessageToJsonString(message, &line, options);
    out << "{\"" << key << "\":" << line << "}\n";
  };
  write((*reader)->header(), "header");
  return ForEachEvent(
      **reader, [&](const v1::Event& event) { write(event, "event"); },
      [&](const v1::TraceTrailer& trailer) { write(trailer, "trailer"); });
}

}  // namespace gpuos
