// Detaching CUPTI from the process (cuptiFinalize), for a detach and,
// between far-apart capture windows, for a suspension.  cuptiFinalize is
// called, as CUPTI's documentation asks, from the exit callsite of a CUDA
// API call: the stopping thread enables the API domains and makes such a
// call itself, and whichever thread's callback comes first finalizes
// (FinalizeInCallback).  Never in a process that has launched a CUDA graph:
// on an H100 with CUDA 13.0's CUPTI, a torch.compile (reduce-overhead) job
// detached with cuptiFinalize failed its next step ("unspecified launch
// failure"); there CUPTI is only unsubscribed, as PyTorch does
// (pytorch/pytorch#112507).  Also how the shim looks at the process's CUDA
// driver without loading it.
#pragma once

#include <string>

#include "cupti_collection_state.h"

namespace gpuos_shim {

// The driver's functions as the process has them (never loading libcuda
// ourselves): whether CUDA is initialized, and a cheap API call of our own.
struct Driver {
  bool loaded = false;
  CUresult (*CtxGetCurrent)(CUcontext*) = nullptr;
};
Driver ProcessDriver();

// Before cuInit every driver call but a few answers NOT_INITIALIZED, and
// asking does not initialize anything; after it, cuCtxGetCurrent succeeds
// (with no context, on a thread that has none).
bool CudaInitialized(const Driver& driver);

// Called by OnCuptiCallback in an API call's exit callsite while a
// finalize is requested: unsubscribes and finalizes.
void FinalizeInCallback();

// Detaches CUPTI from the process (every kind already disabled, every
// buffer drained).  Returns false, with the reason, where it did not: then
// the caller unsubscribes, and CUPTI stays initialized, idle.
bool FinalizeCupti(std::string* why_not);

}  // namespace gpuos_shim
