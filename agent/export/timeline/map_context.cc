// MapContext: see timeline/map_context.h.
#include "export/timeline/map_context.h"

namespace gpuos {

MapContext::MapContext(const v1::TraceHeader& header, TrackTable* tracks, StringTable* strings,
                       FlowTable* flows, RecordSorter* sorter)
    : header_(header), tracks_(tracks), strings_(strings), flows_(flows), sorter_(sorter) {
  // Named so that users can search for them in the viewers.
  fixed_names_.resize(kRecordKindCount);
  for (size_t kind = 0; kind < kRecordKindCount; ++kind) {
    const RecordKindInfo& info = KindInfo(static_cast<RecordKind>(kind));
    for (size_t i = 0; i < info.name_count; ++i) fixed_names_[kind].push_back(strings_->Intern(info.names[i]));
    // FixedName always has a first name to fall back on.
    if (fixed_names_[kind].empty()) fixed_names_[kind].push_back(strings_->Intern("(unnamed)"));
  }
}

}  // namespace gpuos
