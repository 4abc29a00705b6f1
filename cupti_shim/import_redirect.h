// Points other libraries' imports of one function at ours, by rewriting
// their GOT slots.  The shim interposes cuptiSubscribe so that it can step
// aside when the job's own profiler (torch.profiler's Kineto) takes CUPTI
// (cupti_injection.h).  Preloaded, the shim comes first in the symbol
// search and interposes by itself; injected into a running process
// (gpuos-trace --pid), it comes last, and libraries already loaded call
// libcupti directly.  For those, attach redirects their GOT slots.
//
// Only objects already loaded are changed; one loaded later binds the
// usual way.  A slot in a read-only (RELRO) page is written after making the
// page writable for the moment of the write, then read-only again; an
// 8-byte aligned store, so a thread calling through the slot meanwhile
// gets the old target or the new one, both valid.  x86-64 and aarch64
// (RELA relocations); elsewhere nothing is changed.
#pragma once

#include <cstddef>

namespace gpuos_shim {

// Rewrites every GOT slot, in every loaded object but the one containing
// `keep_object_address` (ours) and any that defines `symbol` itself, that
// imports `symbol` and does not yet point at `replacement`.  Returns how
// many were rewritten.
size_t RedirectImports(const char* symbol, void* replacement, const void* keep_object_address);

}  // namespace gpuos_shim
