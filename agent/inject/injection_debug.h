// GPUOS_INJECT_DEBUG=1: each step of an injection, in gpuos-trace and in its
// guardian, as one timestamped line on stderr ("gpuos-inject: <ms> <step>"),
// for finding where the time of a slow injection went.
#pragma once

#include "absl/strings/string_view.h"

namespace gpuos::inject {

void InjectionDebugLog(absl::string_view step);

}  // namespace gpuos::inject
