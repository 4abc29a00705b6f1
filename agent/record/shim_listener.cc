// The shim transport's agent side; see shim_listener.h.
#include "record/shim_listener.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "common/monotonic_clock.h"
#include "stream/text_repairing_parse.h"

namespace gpuos {
namespace {

constexpr size_t kMaxMessageBytes = 1u << 20;
// Messages read from one connection per Pump: a peer that never stops
// sending must not keep the agent from its ring buffer and other peers.
constexpr int kMaxMessagesPerPump = 1024;
// At the end of a recording, how long one connection is read before it is
// given up: a peer left running (a daemon of the job's) that never stops
// sending must not keep gpuos-trace from finishing.
constexpr int64_t kMaxFinalReadNs = 10'000'000'000;

pid_t ParentOf(pid_t pid) {
  std::ifstream stat(absl::StrFormat("/proc/%d/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return -1;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  int ppid = -1;
  char state = 0;
  if (sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

}  // namespace

bool DecodeShimMessage(const void* data, size_t size, pid_t peer_pid, v1::EventBatch* batch,
                       const ShimListener::EventSink& sink) {
  if (size > kMaxMessageBytes ||
      !ParseRepairingText(std::string_view(static_cast<const char*>(data), size), batch)) {
    return false;
  }
  for (v1::Event& event : *batch->mutable_events()) {
    event.set_pid(static_cast<uint32_t>(peer_pid));
    sink(event);
  }
  return true;
}

bool IsDescendantOf(pid_t pid, pid_t ancestor) {
  for (int depth = 0; pid > 1 && depth < 4096; ++depth) {
    if (pid == ancestor) return true;
    pid = ParentOf(pid);
  }
  return pid == ancestor;
}

absl::StatusOr<std::unique_ptr<ShimListener>> ShimListener::Create(uid_t owner_uid, gid_t owner_gid,
                                                                   PeerCheck check, EventSink sink) {
  std::unique_ptr<ShimListener> listener(new ShimListener());
  listener->check_ = std::move(check);
  listener->sink_ = std::move(sink);
  const char* tmp = getenv("TMPDIR");
  std::string templ = absl::StrFormat("%s/gpuos-trace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(templ.data())) {
    return absl::InternalError(absl::StrFormat("cannot create a directory for the CUDA shim's socket "
                                               "in %s: %s", templ, strerror(errno)));
  }
  listener->dir_ = templ;
  // mkdtemp made it 0700; hand it to the traced user so its processes can
  // connect, and nobody else.
  if (chown(templ.c_str(), owner_uid, owner_gid) != 0) {
    return absl::InternalError(absl::StrFormat("cannot give %s to uid %d: %s", templ, owner_uid,
                                               strerror(errno)));
  }
  listener->socket_path_ = templ + "/shim.sock";
  sockaddr_un addr{};
  if (listener->socket_path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "socket path %s is too long; set TMPDIR to a shorter directory", listener->socket_path_));
  }
  listener->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener->listen_fd_ < 0) {
    return absl::InternalError(absl::StrFormat("cannot create the shim socket: %s", strerror(errno)));
  }
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, listener->socket_path_.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(listener->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chown(listener->socket_path_.c_str(), owner_uid, owner_gid) != 0 ||
      chmod(listener->socket_path_.c_str(), 0600) != 0 || listen(listener->listen_fd_, 128) != 0) {
    return absl::InternalError(absl::StrFormat("cannot listen on %s: %s", listener->socket_path_,
                                               strerror(errno)));
  }
  listener->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener->listen_fd_;
  epoll_ctl(listener->epoll_fd_, EPOLL_CTL_ADD, listener->listen_fd_, &ev);
  listener->buffer_.resize(kMaxMessageBytes);
  return listener;
}

ShimListener::~ShimListener() {
  for (const Connection& c : connections_open_) close(c.fd);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (!socket_path_.empty()) unlink(socket_path_.c_str());
  if (!dir_.empty()) rmdir(dir_.c_str());
}

void ShimListener::AcceptAll() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || !check_(cred.pid, cred.uid)) {
      ++rejected_peers_;
      close(fd);
      continue;
    }
    ++connections_;
    connections_open_.push_back({fd, cred.pid});
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

bool ShimListener::ReadConnection(int fd, pid_t pid, bool until_closed) {
  // At the end of a recording the tree is gone, so every peer has closed
  // or is about to; never wait on one for more than a moment.
  int idle_waits = 0;
  const int64_t give_up_ns = until_closed ? static_cast<int64_t>(MonotonicNs()) + kMaxFinalReadNs : 0;
  for (int messages = 0;; ++messages) {
    if (!until_closed && messages >= kMaxMessagesPerPump) return true;  // more next time
    if (until_closed && messages % 256 == 255 && static_cast<int64_t>(MonotonicNs()) > give_up_ns) return false;
    // MSG_TRUNC: the message's real length, so that an oversized one is
    // rejected whole instead of parsed cut short.
    ssize_t n = recv(fd, buffer_.data(), buffer_.size(), MSG_TRUNC | (until_closed ? 0 : MSG_DONTWAIT));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!until_closed || ++idle_waits > 500) return !until_closed;
      usleep(1000);
      continue;
    }
    if (n <= 0) return false;  // closed by the peer, or broken
    if (!DecodeShimMessage(buffer_.data(), static_cast<size_t>(n), pid, &batch_, sink_)) {
      ++malformed_messages_;
    }
  }
}

void ShimListener::Pump(bool until_closed) {
  AcceptAll();
  for (size_t i = 0; i < connections_open_.size();) {
    if (ReadConnection(connections_open_[i].fd, connections_open_[i].pid, until_closed)) {
      ++i;
      continue;
    }
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connections_open_[i].fd, nullptr);
    close(connections_open_[i].fd);
    connections_open_.erase(connections_open_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

}  // namespace gpuos
