// The agent's end of the CUDA shim's transport: a SOCK_SEQPACKET Unix
// socket in a fresh 0700 directory owned by the traced user, so only that
// user and the agent can reach it.  Each message is one serialized
// gpuos.v1.EventBatch.  A connecting process is accepted only if the kernel
// says (SO_PEERCRED) it belongs to the traced tree; its events get the
// peer's pid, whatever they claim.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class ShimListener {
 public:
  // Decides whether a peer (pid, uid) may send events.
  using PeerCheck = std::function<bool(pid_t pid, uid_t uid)>;
  using EventSink = std::function<void(const v1::Event& event)>;

  static absl::StatusOr<std::unique_ptr<ShimListener>> Create(uid_t owner_uid, gid_t owner_gid,
                                                              PeerCheck check, EventSink sink);
  ~ShimListener();  // closes connections, removes the socket and its directory

  const std::string& socket_path() const { return socket_path_; }
  // Readable when a connection or message is waiting (add it to an epoll set).
  int poll_fd() const { return epoll_fd_; }

  // Accepts waiting connections and reads every waiting message, without
  // blocking.  With `until_closed`, keeps reading each connection until its
  // peer has closed it (for the end of a recording, once the tree is gone).
  void Pump(bool until_closed = false);

  uint64_t rejected_peers() const { return rejected_peers_; }
  uint64_t malformed_messages() const { return malformed_messages_; }
  uint64_t connections() const { return connections_; }

 private:
  ShimListener() = default;
  void AcceptAll();
  // Returns false when the connection is finished (closed or broken).
  bool ReadConnection(int fd, pid_t pid, bool until_closed);

  struct Connection {
    int fd;
    pid_t pid;
  };
  PeerCheck check_;
  EventSink sink_;
  std::string dir_;
  std::string socket_path_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::vector<Connection> connections_open_;
  std::string buffer_;
  v1::EventBatch batch_;
  uint64_t rejected_peers_ = 0;
  uint64_t malformed_messages_ = 0;
  uint64_t connections_ = 0;
};

// Decodes one message from a shim connection (a serialized EventBatch) and
// hands each event to `sink` with its pid set to `peer_pid`, whatever the
// message claims.  Returns false, and hands over nothing, when the message
// does not parse.  `batch` is scratch space reused between calls.
bool DecodeShimMessage(const void* data, size_t size, pid_t peer_pid, v1::EventBatch* batch,
                       const ShimListener::EventSink& sink);

// True when `pid` descends from `ancestor` (or is it), read from /proc.
bool IsDescendantOf(pid_t pid, pid_t ancestor);

}  // namespace gpuos
