// Talking to an attached shim; see shim_control_client.h.
#include "record/shim_control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace gpuos {

ShimControlReply ParseShimControlReply(std::string_view reply, std::string_view expect) {
  ShimControlReply parsed;
  if (reply.substr(0, expect.size()) == expect) {
    std::string_view rest = reply.substr(expect.size());
    if (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
    parsed.kind = ShimControlReply::kAnswer;
    parsed.text = std::string(rest);
  } else if (reply.substr(0, 5) == "error") {
    parsed.kind = ShimControlReply::kError;
    parsed.text = std::string(reply);
  }
  return parsed;
}

std::string ShimControlName(pid_t pid) { return absl::StrFormat("gpuos-shim.%d", pid); }

absl::StatusOr<std::unique_ptr<ShimControlClient>> ShimControlClient::Connect(pid_t pid) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrFormat("socket: %s", strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string name = ShimControlName(pid);
  // Abstract namespace: sun_path[0] is NUL, the name follows, no terminator.
  memcpy(addr.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    int err = errno;
    close(fd);
    return absl::NotFoundError(
        absl::StrFormat("pid %d has no gpuos-trace shim listening (%s)", pid, strerror(err)));
  }
  return std::unique_ptr<ShimControlClient>(new ShimControlClient(pid, fd));
}

ShimControlClient::~ShimControlClient() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::string> ShimControlClient::Exchange(const std::string& request,
                                                        const std::string& expect,
                                                        absl::Duration timeout,
                                                        const std::function<void()>& while_waiting) {
  if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    return absl::UnavailableError(
        absl::StrFormat("pid %d: shim control: %s", pid_, strerror(errno)));
  }
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (wait_ms <= 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "pid %d: the shim did not answer '%s' within %s", pid_, request,
          absl::FormatDuration(timeout)));
    }
    if (while_waiting) while_waiting();
    pollfd p{fd_, POLLIN, 0};
    int n = poll(&p, 1, std::min(wait_ms, 10));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char reply[4096];
    ssize_t got = recv(fd_, reply, sizeof(reply) - 1, 0);
    if (got <= 0) {
      return absl::UnavailableError(
          absl::StrFormat("pid %d: the shim closed its control connection", pid_));
    }
    ShimControlReply parsed =
        ParseShimControlReply(std::string_view(reply, static_cast<size_t>(got)), expect);
    if (parsed.kind == ShimControlReply::kAnswer) return parsed.text;
    // A shim serving another agent says so to every new connection at
    // once; it still answers a capture request after that.
    if (parsed.kind == ShimControlReply::kError && expect == "capture" &&
        absl::StrContains(parsed.text, "another gpuos-trace is already connected")) {
      continue;
    }
    if (parsed.kind == ShimControlReply::kError) {
      return absl::FailedPreconditionError(absl::StrFormat("pid %d: shim: %s", pid_, parsed.text));
    }
    // Anything else is not an answer to this request; keep waiting.
  }
}

absl::StatusOr<std::string> ShimControlClient::Attach(const std::string& agent_socket,
                                                      absl::Duration timeout,
                                                      const std::function<void()>& while_waiting) {
  return Exchange("attach " + agent_socket, "attached", timeout, while_waiting);
}

absl::StatusOr<std::string> ShimControlClient::Capture(const std::string& argument, absl::Duration timeout,
                                                       const std::function<void()>& while_waiting) {
  return Exchange("capture " + argument, "capture", timeout, while_waiting);
}

absl::StatusOr<std::string> ShimControlClient::Detach(absl::Duration timeout,
                                                      const std::function<void()>& while_waiting) {
  return Exchange("detach", "detached", timeout, while_waiting);
}

}  // namespace gpuos
