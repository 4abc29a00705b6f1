// The process-life source: bpf/proc.bpf.c (new processes and threads, exec,
// renames, exits of the traced tree; bpf/proc.h) and its records' decoding.
#include <cstring>
#include <string>
#include <string_view>

#include "bpf/proc.h"
#include "common/valid_utf8.h"
#include "proc.skel.h"
#include "record/sources/skeleton_source.h"

namespace gpuos {
namespace {

class ProcSource : public SkeletonSource<proc_bpf, proc_bpf__open_opts, proc_bpf__destroy> {
 public:
  ProcSource() : SkeletonSource("proc") {}

 private:
  absl::Status Configure(const BpfSourceSetup& setup) override {
    skel()->rodata->wakeup_bytes = setup.wakeup_bytes;
    return absl::OkStatus();
  }
};

// A kernel comm is at most 16 bytes and NUL-terminated when shorter.
std::string Comm(const char (&comm)[GPUOS_COMM_LEN]) {
  return ValidUtf8(std::string_view(comm, strnlen(comm, GPUOS_COMM_LEN)));
}

bool DecodeProcessStart(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_proc_event>(data, size);
  if (!e) return false;
  auto* p = event->mutable_process_start();
  p->set_ppid(e->parent_pid);
  p->set_parent_tid(e->parent_tid);
  p->set_comm(Comm(e->comm));
  p->set_clone_flags(e->clone_flags);
  emit(*event);
  return true;
}

bool DecodeThreadStart(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_proc_event>(data, size);
  if (!e) return false;
  auto* t = event->mutable_thread_start();
  t->set_creator_tid(e->parent_tid);
  t->set_comm(Comm(e->comm));
  t->set_clone_flags(e->clone_flags);
  emit(*event);
  return true;
}

bool DecodeCommChange(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_proc_event>(data, size);
  if (!e) return false;
  auto* c = event->mutable_comm_change();
  c->set_old_comm(Comm(e->old_comm));
  c->set_new_comm(Comm(e->comm));
  emit(*event);
  return true;
}

bool DecodeThreadExit(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_proc_event>(data, size);
  if (!e) return false;
  event->mutable_thread_exit()->set_comm(Comm(e->comm));
  emit(*event);
  return true;
}

bool DecodeProcessExit(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_proc_event>(data, size);
  if (!e) return false;
  auto* x = event->mutable_process_exit();
  x->set_comm(Comm(e->comm));
  x->set_wait_status(e->exit_code);
  emit(*event);
  return true;
}

bool DecodeExec(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_exec_event>(data, size);
  if (!e) return false;
  auto* x = event->mutable_exec();
  x->set_filename(
      ValidUtf8(std::string_view(e->filename, strnlen(e->filename, sizeof(e->filename)))));
  x->set_comm(Comm(e->comm));
  x->set_old_tid(e->old_tid);
  emit(*event);
  return true;
}

}  // namespace

extern const BpfSourceModule kProcSource = {
    "proc",
    {{GPUOS_EV_PROCESS_START, "process_start", DecodeProcessStart},
     {GPUOS_EV_THREAD_START, "thread_start", DecodeThreadStart},
     {GPUOS_EV_EXEC, "exec", DecodeExec},
     {GPUOS_EV_COMM_CHANGE, "comm_change", DecodeCommChange},
     {GPUOS_EV_THREAD_EXIT, "thread_exit", DecodeThreadExit},
     {GPUOS_EV_PROCESS_EXIT, "process_exit", DecodeProcessExit}},
    {},
    []() -> std::unique_ptr<BpfSource> { return std::make_unique<ProcSource>(); },
};

}  // namespace gpuos
