// The block I/O source: bpf/block_io.bpf.c (block I/O requests of the
// traced tree, issue to completion, with the thread that submitted them;
// bpf/block_io.h) and its records' decoding.  Optional: on a kernel without
// the block tracepoints the recording goes on without it.
#include <bpf/libbpf.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "block_io.skel.h"
#include "bpf/block_io.h"
#include "record/sources/skeleton_source.h"

namespace gpuos {
namespace {

bool KernelHasTracepoint(const char* name) {
  return libbpf_find_vmlinux_btf_id(name, BPF_TRACE_RAW_TP) >= 0;
}

class BlockIoSource
    : public SkeletonSource<block_io_bpf, block_io_bpf__open_opts, block_io_bpf__destroy> {
 public:
  BlockIoSource() : SkeletonSource("block_io") {}

 private:
  absl::Status Configure(const BpfSourceSetup& setup) override {
    for (const char* needed : {"block_rq_issue", "block_rq_complete"}) {
      if (!KernelHasTracepoint(needed)) {
        return absl::FailedPreconditionError(
            absl::StrFormat("this kernel has no %s tracepoint", needed));
      }
    }
    skel()->rodata->wakeup_bytes = setup.wakeup_bytes;
    // Before Linux 6.5 no tracepoint runs in the submitter's context for
    // every request: requests go to the thread that issues them.
    if (!KernelHasTracepoint("block_io_start")) {
      bpf_program__set_autoload(skel()->progs.handle_block_io_start, false);
      skel()->rodata->attribute_at_issue = 1;
    }
    return absl::OkStatus();
  }
};

// As the kernel's blk_fill_rwbs: "R", "W", "WS", "FWS"...
std::string Rwbs(uint32_t op, uint32_t flags) {
  std::string rwbs;
  if (flags & GPUOS_BLOCK_PREFLUSH) rwbs += 'F';
  switch (op) {
    case 0: rwbs += 'R'; break;
    case 1: rwbs += 'W'; break;
    case 2: rwbs += 'F'; break;
    case 3: rwbs += 'D'; break;
    case 5: rwbs += "DE"; break;
    default: rwbs += 'N';
  }
  if (flags & GPUOS_BLOCK_FUA) rwbs += 'F';
  if (flags & GPUOS_BLOCK_RAHEAD) rwbs += 'A';
  if (flags & GPUOS_BLOCK_SYNC) rwbs += 'S';
  if (flags & GPUOS_BLOCK_META) rwbs += 'M';
  return rwbs;
}

// blk_status_t -> negative errno, for the codes stable since Linux 4.13;
// any other failure reads as an I/O error.
int32_t StatusErrno(uint32_t status) {
  switch (status) {
    case 0: return 0;
    case 1: return -EOPNOTSUPP;
    case 2: return -ETIMEDOUT;
    case 3: return -ENOSPC;
  }
  return -EIO;
}

// The device's name ("vda", "nvme0n1") from sysfs, read once per device.
std::string DeviceName(uint32_t dev) {
  static std::mutex mu;
  static std::map<uint32_t, std::string>* names = new std::map<uint32_t, std::string>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = names->find(dev);
  if (it != names->end()) return it->second;
  std::ifstream uevent(absl::StrFormat("/sys/dev/block/%d:%d/uevent", dev >> 20, dev & 0xfffff));
  std::string line, name;
  while (std::getline(uevent, line)) {
    if (absl::StartsWith(line, "DEVNAME=")) name = line.substr(8);
  }
  (*names)[dev] = name;
  return name;
}

bool DecodeBlockIo(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_block_io_event>(data, size);
  if (!e) return false;
  auto* b = event->mutable_block_io();
  b->set_duration_ns(e->duration_ns);
  b->set_queued_ns(e->queued_ns);
  b->set_dev(e->dev);
  b->set_dev_name(DeviceName(e->dev));
  b->set_sector(e->sector);
  b->set_bytes(e->bytes);
  b->set_rwbs(Rwbs(e->op, e->flags));
  b->set_error(StatusErrno(e->status));
  emit(*event);
  return true;
}

}  // namespace

extern const BpfSourceModule kBlockIoSource = {
    "block_io",
    {{GPUOS_EV_BLOCK_IO, "block_io", DecodeBlockIo}},
    {{GPUOS_MAP_BLOCK_IO_IN_FLIGHT, "block_io_in_flight"}},
    []() -> std::unique_ptr<BpfSource> { return std::make_unique<BlockIoSource>(); },
    /*optional=*/true,
};

}  // namespace gpuos
