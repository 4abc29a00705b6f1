// The agent's side of the shim's control socket (cupti_shim/shim_control_server.h):
// in a process started with `gpuos-trace --prepare` or injected during an
// attach, the shim listens on the abstract Unix socket "gpuos-shim.<pid>";
// "attach <agent socket>" switches its NVTX and CUPTI recording on and
// points it at the agent, "detach" flushes and switches everything off.
// Closing the connection detaches too, so a gpuos-trace that dies leaves
// the shim idle.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gpuos {

class ShimControlClient {
 public:
  // Connects to the shim of `pid`; NotFound when no shim listens there.
  static absl::StatusOr<std::unique_ptr<ShimControlClient>> Connect(pid_t pid);
  ~ShimControlClient();  // closing the connection detaches the shim

  // Sends "attach"; returns the shim's reply after "attached " (what it
  // could switch on, e.g. "cupti=1 nvtx=1 CUPTI 130000 from ...").
  // `while_waiting` runs every few ms until the answer comes (the agent
  // keeps reading the shim's events meanwhile).
  absl::StatusOr<std::string> Attach(const std::string& agent_socket, absl::Duration timeout,
                                     const std::function<void()>& while_waiting = {});
  // Sends "capture <argument>" (a --capture spec, or a number of steps:
  // cupti_shim/capture_control.h); returns what the shim will do.  Served
  // also while another agent is attached.
  absl::StatusOr<std::string> Capture(const std::string& argument, absl::Duration timeout,
                                      const std::function<void()>& while_waiting = {});
  // Sends "detach"; returns once the shim says it has flushed everything.
  absl::StatusOr<std::string> Detach(absl::Duration timeout,
                                     const std::function<void()>& while_waiting = {});

  pid_t pid() const { return pid_; }

 private:
  ShimControlClient(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  absl::StatusOr<std::string> Exchange(const std::string& request, const std::string& expect,
                                       absl::Duration timeout,
                                       const std::function<void()>& while_waiting);
  pid_t pid_;
  int fd_;
};

// One message from the shim, read as the answer to a request that expects
// `expect` ("attached", "detached"): the answer (the text after `expect`),
// the shim's "error ...", or something else (not an answer: keep waiting).
struct ShimControlReply {
  enum Kind { kAnswer, kError, kOther };
  Kind kind = kOther;
  std::string text;  // kAnswer: after `expect` and one space; kError: the whole reply
};
ShimControlReply ParseShimControlReply(std::string_view reply, std::string_view expect);

// The abstract socket name the shim of `pid` listens on (without the
// leading NUL).
std::string ShimControlName(pid_t pid);

}  // namespace gpuos
