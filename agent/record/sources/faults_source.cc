// The page-fault source: bpf/faults.bpf.c (user page faults of traced
// threads, counted in short windows; bpf/faults.h) and its records' decoding.
#include "bpf/faults.h"
#include "faults.skel.h"
#include "record/bpf_session.h"
#include "record/sources/skeleton_source.h"

namespace gpuos {
namespace {

class FaultsSource : public SkeletonSource<faults_bpf, faults_bpf__open_opts, faults_bpf__destroy> {
 public:
  FaultsSource() : SkeletonSource("faults") {}

 private:
  absl::Status Configure(const BpfSourceSetup& setup) override {
    skel()->rodata->wakeup_bytes = setup.wakeup_bytes;
    skel()->rodata->fault_window_ns = setup.options.fault_window_ns;
    return absl::OkStatus();
  }
};

bool DecodePageFaults(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_page_fault_event>(data, size);
  if (!e) return false;
  auto* f = event->mutable_page_faults();
  f->set_last_ns(e->last_ns);
  f->set_count(e->count);
  f->set_major(e->major);
  emit(*event);
  return true;
}

}  // namespace

extern const BpfSourceModule kFaultsSource = {
    "faults",
    {{GPUOS_EV_PAGE_FAULTS, "page_faults", DecodePageFaults}},
    {{GPUOS_MAP_FAULT_STATE, "fault_state"}},
    []() -> std::unique_ptr<BpfSource> { return std::make_unique<FaultsSource>(); },
};

}  // namespace gpuos
