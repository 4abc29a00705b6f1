// Raw BPF records -> gpuos.v1.Event; see event_decoder.h.
#include "record/event_decoder.h"

#include <vector>

#include "bpf/event_header.h"
#include "record/sources/bpf_source.h"

namespace gpuos {
namespace {

using Decoder = decltype(BpfRecordKind::decode);

// Every listed source's decoder, by record kind.
const std::vector<Decoder>& DecodersByKind() {
  static const auto* const kDecoders = [] {
    auto* decoders = new std::vector<Decoder>(GPUOS_EV_KIND_COUNT, nullptr);
    for (const BpfSourceModule* module : BpfSourceModules()) {
      for (const BpfRecordKind& kind : module->kinds) {
        if (kind.kind < decoders->size()) (*decoders)[kind.kind] = kind.decode;
      }
    }
    return decoders;
  }();
  return *kDecoders;
}

}  // namespace

DecodeResult DecodeBpfRecord(const void* data, size_t size, v1::Event* event,
                             absl::FunctionRef<void(v1::Event&)> emit) {
  const auto* hdr = RecordAs<gpuos_event_header>(data, size);
  if (!hdr) return DecodeResult::kTooShort;
  const std::vector<Decoder>& decoders = DecodersByKind();
  if (hdr->kind >= decoders.size() || !decoders[hdr->kind]) return DecodeResult::kUnknownKind;
  // The header's fields, the same for every event of a record.
  event->Clear();
  event->set_ts_ns(hdr->ts_ns);
  event->set_pid(hdr->pid);
  event->set_tid(hdr->tid);
  return decoders[hdr->kind](data, size, event, emit) ? DecodeResult::kOk : DecodeResult::kTooShort;
}

}  // namespace gpuos
