// Parsing a trace record or a shim message whose text is not all UTF-8.
// proto3 refuses a `string` field that is not valid UTF-8, and with it the
// whole message: a batch of thousands of events lost to one process name
// cut inside a character (traces recorded before common/valid_utf8.h), or
// to one NVTX name from an old shim.  This parses such a message anyway,
// with every bad byte of its text replaced by U+FFFD.
#pragma once

#include <string_view>

#include <google/protobuf/message.h>

namespace gpuos {

// ParseFromArray, and when that fails, a second parse in which text fields
// are taken as raw bytes and then made valid UTF-8.  False when the bytes
// are not a message of that type at all.  `message` must be one of
// proto/gpuos_trace.proto's.
bool ParseRepairingText(std::string_view bytes, google::protobuf::Message* message);

}  // namespace gpuos
