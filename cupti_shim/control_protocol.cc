// The control socket's text protocol; see control_protocol.h.
#include "control_protocol.h"

#include <string>

namespace gpuos_shim {
namespace {

// Control characters would break the one-line replies and the agent's logs.
std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

}  // namespace

ControlRequest ParseControlRequest(std::string_view message) {
  ControlRequest request;
  // Tolerate a trailing newline from hand-typed tests (socat).
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
    message.remove_suffix(1);
  }
  if (message == "detach") {
    request.kind = ControlRequest::kDetach;
    return request;
  }
  constexpr std::string_view kCapture = "capture ";
  if (message.substr(0, kCapture.size()) == kCapture) {
    std::string_view argument = message.substr(kCapture.size());
    if (argument.empty() || argument.size() > 256) {
      request.error = "capture needs a spec or a number of steps: \"capture 20\"";
    } else {
      request.kind = ControlRequest::kCapture;
      request.capture = OneLine(argument);
    }
    return request;
  }
  constexpr std::string_view kAttach = "attach";
  if (message.substr(0, kAttach.size()) == kAttach &&
      (message.size() == kAttach.size() || message[kAttach.size()] == ' ')) {
    std::string_view path = message.substr(kAttach.size());
    if (!path.empty()) path.remove_prefix(1);
    if (path.empty()) {
      request.error = "attach needs the agent's socket path: \"attach <path>\"";
    } else if (path.size() > kMaxAgentSocketPath) {
      request.error = "the agent's socket path is longer than " +
                      std::to_string(kMaxAgentSocketPath) + " bytes";
    } else if (path.find('\0') != std::string_view::npos) {
      request.error = "the agent's socket path holds a NUL byte";
    } else {
      request.kind = ControlRequest::kAttach;
      request.agent_socket = std::string(path);
    }
    return request;
  }
  request.error = "unknown request \"" + OneLine(message.substr(0, 40)) +
                  "\" (expected \"attach <path>\", \"detach\" or \"capture <N|spec>\")";
  return request;
}

std::string AttachedReply(bool cupti, bool nvtx, std::string_view status) {
  return std::string("attached cupti=") + (cupti ? "1" : "0") + " nvtx=" + (nvtx ? "1" : "0") +
         " " + OneLine(status);
}

std::string DetachedReply(uint64_t events_sent) {
  return "detached " + std::to_string(events_sent);
}

std::string ErrorReply(std::string_view why) { return "error " + OneLine(why); }

bool PeerAllowed(uid_t peer_uid, uid_t real_uid, uid_t effective_uid) {
  return peer_uid == 0 || peer_uid == real_uid || peer_uid == effective_uid;
}

std::string ControlSocketName(pid_t pid) { return "gpuos-shim." + std::to_string(pid); }

}  // namespace gpuos_shim
