// Raw BPF records -> gpuos.v1.Event; see event_decoder.h.
#include "record/event_decoder.h"

#include "common/valid_utf8.h"

#include <cstddef>
#include <cstring>
#include <string>

#include "bpf/cuda_uprobes.h"
#include "bpf/event_header.h"
#include "bpf/faults.h"
#include "bpf/futex.h"
#include "bpf/mm.h"
#include "bpf/proc.h"
#include "bpf/offcpu.h"
#include "record/torch_backward_probes.h"

namespace gpuos {
namespace {

// A kernel comm is at most 16 bytes and NUL-terminated when shorter.
std::string Comm(const char (&comm)[GPUOS_COMM_LEN]) {
  return ValidUtf8(std::string_view(comm, strnlen(comm, GPUOS_COMM_LEN)));
}

template <typename T>
const T* As(const void* data, size_t size) {
  return size >= sizeof(T) ? static_cast<const T*>(data) : nullptr;
}

}  // namespace

const char* CudaUprobeFunctionName(uint32_t function) {
#define GPUOS_CUDA_FN_NAME(name, args) #name,
  static const char* const kNames[] = {GPUOS_CUDA_UPROBE_FUNCTIONS(GPUOS_CUDA_FN_NAME)};
#undef GPUOS_CUDA_FN_NAME
  return function < GPUOS_CUDA_FN_COUNT ? kNames[function] : nullptr;
}

namespace {

// The header's fields, the same for every event of a record.
void SetHeader(const gpuos_event_header& hdr, v1::Event* event) {
  event->Clear();
  event->set_ts_ns(hdr.ts_ns);
  event->set_pid(hdr.pid);
  event->set_tid(hdr.tid);
}

// The call's own start is the event's time.
void SetMmCall(const gpuos_mm_record& call, v1::Event* event) {
  event->set_ts_ns(call.start_ns);
  if (!call.is_munmap) {
    auto* m = event->mutable_mmap();
    m->set_duration_ns(call.duration_ns);
    m->set_addr(call.addr);
    m->set_length(call.length);
    m->set_prot(call.prot);
    m->set_flags(call.flags);
    m->set_fd(call.fd);
    m->set_result(call.result);
  } else {
    auto* m = event->mutable_munmap();
    m->set_duration_ns(call.duration_ns);
    m->set_addr(call.addr);
    m->set_length(call.length);
    m->set_result(call.result);
  }
}

// A batch of one thread's mmap/munmap calls (bpf/mm.h): one event per
// call, stamped with the call's own start.
DecodeResult DecodeMmCalls(const void* data, size_t size, v1::Event* event,
                           absl::FunctionRef<void(v1::Event&)> emit) {
  // Cut after its last call: shorter than the struct, so not As<>.
  constexpr size_t kCallsOffset = offsetof(gpuos_mm_calls_event, calls);
  if (size < kCallsOffset) return DecodeResult::kTooShort;
  const auto* batch = static_cast<const gpuos_mm_calls_event*>(data);
  const size_t count = batch->count;
  if (count == 0 || count > GPUOS_MM_BATCH ||
      size < kCallsOffset + count * sizeof(gpuos_mm_record)) {
    return DecodeResult::kTooShort;
  }
  for (size_t i = 0; i < count; ++i) {
    SetHeader(batch->hdr, event);
    SetMmCall(batch->calls[i], event);
    emit(*event);
  }
  return DecodeResult::kOk;
}

DecodeResult DecodeOne(const void* data, size_t size, v1::Event* event);

}  // namespace

DecodeResult DecodeBpfRecord(const void* data, size_t size, v1::Event* event,
                             absl::FunctionRef<void(v1::Event&)> emit) {
  const auto* hdr = As<gpuos_event_header>(data, size);
  if (!hdr) return DecodeResult::kTooShort;
  if (hdr->kind == GPUOS_EV_MM_CALLS) return DecodeMmCalls(data, size, event, emit);
  const DecodeResult result = DecodeOne(data, size, event);
  if (result == DecodeResult::kOk) emit(*event);
  return result;
}

namespace {

DecodeResult DecodeOne(const void* data, size_t size, v1::Event* event) {
  const auto* hdr = As<gpuos_event_header>(data, size);
  if (!hdr) return DecodeResult::kTooShort;
  SetHeader(*hdr, event);

  switch (hdr->kind) {
    case GPUOS_EV_PROCESS_START:
    case GPUOS_EV_THREAD_START:
    case GPUOS_EV_COMM_CHANGE:
    case GPUOS_EV_THREAD_EXIT:
    case GPUOS_EV_PROCESS_EXIT: {
      const auto* e = As<gpuos_proc_event>(data, size);
      if (!e) return DecodeResult::kTooShort;
      if (hdr->kind == GPUOS_EV_PROCESS_START) {
        auto* p = event->mutable_process_start();
        p->set_ppid(e->parent_pid);
        p->set_parent_tid(e->parent_tid);
        p->set_comm(Comm(e->comm));
        p->set_clone_flags(e->clone_flags);
      } else if (hdr->kind == GPUOS_EV_THREAD_START) {
        auto* t = event->mutable_thread_start();
        t->set_creator_tid(e->parent_tid);
        t->set_comm(Comm(e->comm));
        t->set_clone_flags(e->clone_flags);
      } else if (hdr->kind == GPUOS_EV_COMM_CHANGE) {
        auto* c = event->mutable_comm_change();
        c->set_old_comm(Comm(e->old_comm));
        c->set_new_comm(Comm(e->comm));
      } else if (hdr->kind == GPUOS_EV_THREAD_EXIT) {
        event->mutable_thread_exit()->set_comm(Comm(e->comm));
      } else {
        auto* x = event->mutable_process_exit();
        x->set_comm(Comm(e->comm));
        x->set_wait_status(e->exit_code);
      }
      return DecodeResult::kOk;
    }
    case GPUOS_EV_EXEC: {
      const auto* e = As<gpuos_exec_event>(data, size);
      if (!e) return DecodeResult::kTooShort;
      auto* x = event->mutable_exec();
      x->set_filename(ValidUtf8(std::string_view(e->filename, strnlen(e->filename, sizeof(e->filename)))));
      x->set_comm(Comm(e->comm));
      x->set_old_tid(e->old_tid);
      return DecodeResult::kOk;
    }
    case GPUOS_EV_OFF_CPU: {
      const auto* e = As<gpuos_off_cpu_event>(data, size);
      if (!e) return DecodeResult::kTooShort;
      auto* o = event->mutable_off_cpu();
      o->set_duration_ns(e->duration_ns);
      o->set_runqueue_ns(e->runqueue_ns);
      o->set_cause(e->cause <= GPUOS_OFFCPU_PAGE_FAULT ? static_cast<v1::OffCpuCause>(e->cause)
                                                         : v1::OFF_CPU_CAUSE_UNKNOWN);
      o->set_syscall_nr(e->syscall_nr);
      o->set_voluntary(e->voluntary != 0);
      o->set_prev_state(e->prev_state);
      o->set_woken_by_tid(e->woken_by_tid);
      o->set_waker_pid(e->waker_pid);
      o->set_woken_from_interrupt((e->waker_flags & GPUOS_WAKER_INTERRUPT) != 0);
      o->set_waker_context_known((e->waker_flags & GPUOS_WAKER_CONTEXT_KNOWN) != 0);
      return DecodeResult::kOk;
    }
    case GPUOS_EV_PAGE_FAULTS: {
      const auto* e = As<gpuos_page_fault_event>(data, size);
      if (!e) return DecodeResult::kTooShort;
      auto* f = event->mutable_page_faults();
      f->set_last_ns(e->last_ns);
      f->set_count(e->count);
      f->set_major(e->major);
      return DecodeResult::kOk;
    }
    case GPUOS_EV_MMAP:
    case GPUOS_EV_MUNMAP: {
      const auto* e = As<gpuos_mm_event>(data, size);
      if (!e) return DecodeResult::kTooShort;
      SetMmCall(e->call, event);
      return DecodeResult::kOk;
    }
    case GPUOS_EV_FUTEX_WAIT: {
      const auto* e = As<gpuos_futex_wait_event>(data, size);
      if (!e) return DecodeResult::kTooShort;
      auto* f = event->mutable_futex_wait();
      f->set_duration_ns(e->duration_ns);
      f->set_uaddr(e->uaddr);
      f->set_op(e->op);
      f->set_has_timeout(e->has_timeout != 0);
      f->set_result(e->result);
      return DecodeResult::kOk;
    }
    case GPUOS_EV_TORCH_BACKWARD:
      return DecodeTorchBackwardRecord(data, size, event) ? DecodeResult::kOk : DecodeResult::kTooShort;
    case GPUOS_EV_CUDA_CALL: {
      const auto* e = As<gpuos_cuda_call_event>(data, size);
      if (!e) return DecodeResult::kTooShort;
      const char* name = CudaUprobeFunctionName(e->function);
      auto* c = event->mutable_cuda_api();
      c->set_duration_ns(e->duration_ns);
      // An id this agent does not know would be a kernel/agent mismatch;
      // keep the call, named by its id.
      c->set_name(name ? name : "cuda_uprobe_function_" + std::to_string(e->function));
      c->set_driver(true);
      c->set_from_uprobe(true);
      c->set_return_value(e->result);
      c->set_bytes(e->bytes);
      c->set_grid_x(e->grid[0]);
      c->set_grid_y(e->grid[1]);
      c->set_grid_z(e->grid[2]);
      c->set_block_x(e->block[0]);
      c->set_block_y(e->block[1]);
      c->set_block_z(e->block[2]);
      return DecodeResult::kOk;
    }
  }
  return DecodeResult::kUnknownKind;
}

}  // namespace
}  // namespace gpuos
