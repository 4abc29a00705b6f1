// libFuzzer target: the text protocol of the shim's control socket, both
// ends.  The input is one message as either side may receive it:
//  - the shim parses it as a request (ParseControlRequest): an "attach"
//    must carry a path that fits sockaddr_un and holds no NUL, and
//    "attach <that path>" must parse back to the same; every error must
//    make a one-line reply;
//  - the agent parses it as the shim's reply (ParseShimControlReply) to
//    "attach" and to "detach"; the replies the shim builds from any status
//    text are one line and parse as answers.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "control_protocol.h"
#include "record/shim_control_client.h"

namespace {

bool OneLine(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view message(reinterpret_cast<const char*>(data), size);
  using gpuos_shim::ControlRequest;

  const ControlRequest request = gpuos_shim::ParseControlRequest(message);
  switch (request.kind) {
    case ControlRequest::kAttach: {
      Check(!request.agent_socket.empty());
      Check(request.agent_socket.size() <= gpuos_shim::kMaxAgentSocketPath);
      Check(request.agent_socket.find('\0') == std::string::npos);
      const ControlRequest again = gpuos_shim::ParseControlRequest("attach " + request.agent_socket);
      Check(again.kind == ControlRequest::kAttach && again.agent_socket == request.agent_socket);
      break;
    }
    case ControlRequest::kDetach:
      break;
    case ControlRequest::kCapture: {
      Check(!request.capture.empty() && request.capture.size() <= 256);
      Check(OneLine(request.capture));
      const ControlRequest again = gpuos_shim::ParseControlRequest("capture " + request.capture);
      Check(again.kind == ControlRequest::kCapture && again.capture == request.capture);
      break;
    }
    case ControlRequest::kInvalid: {
      Check(!request.error.empty());
      const std::string reply = gpuos_shim::ErrorReply(request.error);
      Check(OneLine(reply));
      Check(gpuos::ParseShimControlReply(reply, "attached").kind == gpuos::ShimControlReply::kError);
      break;
    }
  }

  for (std::string_view expect : {"attached", "detached"}) {
    const gpuos::ShimControlReply reply = gpuos::ParseShimControlReply(message, expect);
    if (reply.kind == gpuos::ShimControlReply::kAnswer) Check(reply.text.size() < size);
  }
  const std::string attached = gpuos_shim::AttachedReply(size % 2, size % 3, message);
  Check(OneLine(attached));
  Check(gpuos::ParseShimControlReply(attached, "attached").kind == gpuos::ShimControlReply::kAnswer);
  Check(OneLine(gpuos_shim::ErrorReply(message)));
  return 0;
}
