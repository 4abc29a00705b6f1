// libFuzzer target: one message on the agent's shim socket, decoded as the
// ShimListener decodes it (DecodeShimMessage), and the events it yields
// written to a trace and read back by every consumer (trace_consumers.h),
// as a recording with that shim would have them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpuos_trace.pb.h"
#include "record/shim_listener.h"
#include "stream/record_framing.h"
#include "trace_consumers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gpuos_fuzz::MemoryFile* file = new gpuos_fuzz::MemoryFile();
  constexpr pid_t kPeer = 4242;
  gpuos::v1::EventBatch scratch;
  gpuos::v1::Record record;
  gpuos::v1::EventBatch* batch = record.mutable_batch();
  const bool parsed = gpuos::DecodeShimMessage(
      data, size, kPeer, &scratch, [&](const gpuos::v1::Event& event) {
        if (event.pid() != static_cast<uint32_t>(kPeer)) __builtin_trap();  // the peer's pid, always
        *batch->add_events() = event;
      });
  if (!parsed) {
    if (batch->events_size() != 0) __builtin_trap();  // nothing from a message that did not parse
    return 0;
  }
  // The trace a recording of this peer would hold: a header (the root is
  // the peer), the shim's events, a trailer.
  std::string bytes = gpuos::EncodeFileMagic();
  gpuos::v1::Record header;
  header.mutable_header()->set_format_version(gpuos::kFormatVersion);
  header.mutable_header()->set_root_pid(kPeer);
  header.mutable_header()->set_page_size(4096);
  header.mutable_header()->set_fault_window_ns(1'000'000);
  header.mutable_header()->set_online_cpus(2);
  gpuos::AppendFrame(header.SerializeAsString(), &bytes);
  gpuos::AppendFrame(record.SerializeAsString(), &bytes);
  gpuos::v1::Record trailer;
  trailer.mutable_trailer();
  gpuos::AppendFrame(trailer.SerializeAsString(), &bytes);
  file->Set(bytes);
  gpuos_fuzz::ConsumeTrace(file->path());
  return 0;
}
