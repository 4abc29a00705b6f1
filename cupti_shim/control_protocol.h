// The text protocol of the shim's control socket (shim_control_server.h), kept
// apart from the sockets so it can be tested on its own.  One request or
// reply per SOCK_SEQPACKET message, no newline:
//   agent -> shim   "attach <agent socket path>"   "detach"
//                   "capture <spec>" | "capture <N>" | "capture off"
//                   (capture_control.h; served on any allowed connection,
//                   also while another agent is attached)
//   shim -> agent   "attached cupti=<0|1> nvtx=<0|1> <status text>"
//                   "detached <events sent since attach>"
//                   "capture <what it will do>"
//                   "error <one line>"  (the request changed nothing)
// The peer rule: uid 0, or the uid the process runs as (real or effective).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuos_shim {

// Longest agent socket path: what fits in sockaddr_un.sun_path with its NUL.
inline constexpr size_t kMaxAgentSocketPath = 107;

struct ControlRequest {
  enum Kind { kAttach, kDetach, kCapture, kInvalid };
  Kind kind = kInvalid;
  std::string agent_socket;  // kAttach
  std::string capture;       // kCapture: the text after "capture "
  std::string error;         // kInvalid: why, for an "error" reply
};

ControlRequest ParseControlRequest(std::string_view message);

std::string AttachedReply(bool cupti, bool nvtx, std::string_view status);
std::string DetachedReply(uint64_t events_sent);
std::string ErrorReply(std::string_view why);

bool PeerAllowed(uid_t peer_uid, uid_t real_uid, uid_t effective_uid);

// The abstract socket name the shim of `pid` listens on, without the
// leading NUL ("gpuos-shim.<pid>").
std::string ControlSocketName(pid_t pid);

}  // namespace gpuos_shim
