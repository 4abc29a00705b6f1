// The thread name (comm) an event states, for every consumer that follows
// names over a trace: process and thread starts, exec, renames and exits
// each carry the name the thread had then.
#pragma once

#include <string>

#include "gpuos_trace.pb.h"

namespace gpuos {

// The comm `event` states, or null when its kind carries none.
inline const std::string* StatedComm(const v1::Event& event) {
  switch (event.payload_case()) {
    case v1::Event::kProcessStart: return &event.process_start().comm();
    case v1::Event::kThreadStart: return &event.thread_start().comm();
    case v1::Event::kExec: return &event.exec().comm();
    case v1::Event::kCommChange: return &event.comm_change().new_comm();
    case v1::Event::kThreadExit: return &event.thread_exit().comm();
    case v1::Event::kProcessExit: return &event.process_exit().comm();
    default: return nullptr;
  }
}

}  // namespace gpuos
