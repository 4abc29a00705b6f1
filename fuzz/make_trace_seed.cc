// Turns a real .gpuos trace into small fuzz seeds (fuzz/corpus/, README in
// docs/fuzzing.md):
//   make_trace_seed TRACE OUT_PREFIX [per_kind]
// writes
//   OUT_PREFIX.framed   trace_reader_fuzzer input, records form (byte 1):
//                       the header, the first `per_kind` events of every
//                       payload kind in file order, the trailer;
//   OUT_PREFIX.file     the same as a .gpuos file (byte 0, then the file);
//   OUT_PREFIX.shim     shim_message_fuzzer input: one EventBatch of the
//                       shim's kinds (NVTX, CUDA, shim stats) among them.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "gpuos_trace.pb.h"
#include "stream/record_framing.h"
#include "stream/trace_reader.h"

namespace {

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    fprintf(stderr, "make_trace_seed: cannot write %s\n", path.c_str());
    exit(1);
  }
}

void AppendRecord(const gpuos::v1::Record& record, std::string* records, std::string* file) {
  const std::string payload = record.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(payload.size());
  records->append(reinterpret_cast<const char*>(&length), 4);
  records->append(payload);
  gpuos::AppendFrame(payload, file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: make_trace_seed TRACE OUT_PREFIX [per_kind]\n");
    return 2;
  }
  const int per_kind = argc > 3 ? atoi(argv[3]) : 3;
  auto reader = gpuos::TraceReader::Open(argv[1]);
  if (!reader.ok()) {
    fprintf(stderr, "make_trace_seed: %s\n", std::string(reader.status().message()).c_str());
    return 1;
  }
  std::string records(1, '\1'), file(1, '\0');
  file += gpuos::EncodeFileMagic();
  gpuos::v1::Record header;
  *header.mutable_header() = (*reader)->header();
  AppendRecord(header, &records, &file);

  std::map<int, int> taken;
  gpuos::v1::Record batch, trailer;
  gpuos::v1::EventBatch shim;
  gpuos::v1::Record record;
  while ((*reader)->Next(&record)) {
    if (record.has_trailer()) trailer = record;
    if (!record.has_batch()) continue;
    for (const gpuos::v1::Event& event : record.batch().events()) {
      if (taken[event.payload_case()]++ >= per_kind) continue;
      *batch.mutable_batch()->add_events() = event;
      if (event.payload_case() >= gpuos::v1::Event::kNvtxRange) *shim.add_events() = event;
      if (batch.batch().events_size() == 16) {
        AppendRecord(batch, &records, &file);
        batch.Clear();
      }
    }
  }
  if (batch.batch().events_size() > 0) AppendRecord(batch, &records, &file);
  if (trailer.has_trailer()) AppendRecord(trailer, &records, &file);
  const std::string prefix = argv[2];
  Write(prefix + ".framed", records);
  Write(prefix + ".file", file);
  if (shim.events_size() > 0) Write(prefix + ".shim", shim.SerializeAsString());
  return 0;
}
