// The control listener and the injector's entry point; see shim_control_server.h.
#include "shim_control_server.h"

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "capture_control.h"
#include "control_protocol.h"
#include "event_channel.h"
#include "fork_handlers.h"
#include "stub_page.h"
#ifdef GPUOS_SHIM_HAS_CUPTI
#include "cupti_injection.h"
#endif

namespace gpuos_shim {
namespace {

constexpr uint64_t kStubWaitNs = 30ull * 1'000'000'000;
constexpr int kStubPollMs = 20;

// A connection that has not attached is dropped after this long without a
// request, so that a client that connects and stays silent cannot keep
// every gpuos-trace out ("another gpuos-trace is already connected").
// gpuos-trace sends "attach" as soon as it connects.  Tests shorten it with
// GPUOS_SHIM_CONTROL_IDLE_MS.
uint64_t IdleControlNs() {
  static const uint64_t ns = [] {
    const char* ms = getenv("GPUOS_SHIM_CONTROL_IDLE_MS");
    const long long value = ms != nullptr ? atoll(ms) : 0;
    return (value > 0 ? static_cast<uint64_t>(value) : 10'000ull) * 1'000'000ull;
  }();
  return ns;
}
// ... and after this many requests in a row that were not understood.
constexpr int kMaxInvalidRequests = 16;

enum class Origin { kNone, kPrepared, kInjected };

struct PendingUnmap {
  uintptr_t page;
  size_t size;
  int tid;
  uint64_t deadline_ns;
};

struct Control {
  // Guards the fields below.  Held only for short bookkeeping: never
  // across a request, CUPTI, or anything that may block (fork waits on it).
  std::mutex mu;
  bool running = false;  // listener bound and its thread started, in this process
  int listen_fd = -1;
  int wake_fd = -1;  // eventfd: a new stub page to watch
  int conn_fd = -1;  // the agent's connection, so a fork child can close its copy
  Origin origin = Origin::kNone;
  std::vector<PendingUnmap> unmaps;

  std::atomic<bool> possible{false};          // prepared, or a listener ran here
  std::atomic<bool> restart_in_child{false};  // a fork child that needs its own
  bool debug = getenv("GPUOS_SHIM_DEBUG") != nullptr;
};

// Never destroyed: the listener's thread runs until the process ends.
Control& C() {
  static Control* control = new Control();
  return *control;
}

void Log(const char* format, ...) {
  if (!C().debug) return;
  va_list args;
  va_start(args, format);
  fprintf(stderr, "gpuos-shim[%d]: ", getpid());
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
}

uint64_t NowNs() { return MonotonicNs(); }

void Reply(int fd, const std::string& text) {
  // A short message to a peer that asked for it; never wait on it.
  if (send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    Log("control reply failed: %s", strerror(errno));
  }
}

// ---- Stub pages ----------------------------------------------------------

// Unmaps what may go, drops what waited too long (left mapped).  Returns
// whether any is still pending.
bool ServiceUnmaps() {
  Control& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  const uint64_t now = NowNs();
  std::vector<PendingUnmap> keep;
  for (const PendingUnmap& u : c.unmaps) {
    StubThreadPlace place = LocateStubThread(u.tid, u.page, u.size);
    if (place == StubThreadPlace::kOutside || place == StubThreadPlace::kGone) {
      int rc = munmap(reinterpret_cast<void*>(u.page), u.size);
      Log("stub page %#lx (+%zu) %s: thread %d %s", static_cast<unsigned long>(u.page), u.size,
          rc == 0 ? "unmapped" : strerror(errno), u.tid,
          place == StubThreadPlace::kGone ? "exited" : "left it");
    } else if (now > u.deadline_ns) {
      Log("stub page %#lx left mapped: thread %d still in it or running after 30 s",
          static_cast<unsigned long>(u.page), u.tid);
    } else {
      keep.push_back(u);
    }
  }
  c.unmaps.swap(keep);
  return !c.unmaps.empty();
}

bool TaskExists(int tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d", tid);
  return access(path, F_OK) == 0;
}

void QueueUnmap(uintptr_t page, size_t size, int stub_tid) {
  const long page_size = sysconf(_SC_PAGESIZE);
  if (page_size <= 0 || page % static_cast<uintptr_t>(page_size) != 0 || size == 0) {
    Log("stub page %#lx (+%zu) is not page-aligned: left mapped", static_cast<unsigned long>(page),
        size);
    return;
  }
  // The stub calls us, so the caller is the stub's thread as this process
  // sees it.  A tid the injector read in another pid namespace does not
  // exist here; calling it "exited" would unmap the page under the stub.
  const int caller = static_cast<int>(syscall(SYS_gettid));
  int tid = stub_tid;
  if (tid <= 0 || (tid != caller && !TaskExists(tid))) tid = caller;
  Control& c = C();
  int wake = -1;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.unmaps.push_back({page, size, tid, NowNs() + kStubWaitNs});
    wake = c.wake_fd;
  }
  if (wake >= 0) {
    uint64_t one = 1;
    if (write(wake, &one, sizeof(one)) < 0) Log("cannot wake the control thread: %s", strerror(errno));
  }
}

// ---- Requests ------------------------------------------------------------

// Whether NVTX ranges made from now on reach the agent, and why not.
bool NvtxWillRecord(std::string* note) {
  if (NvtxActive()) return true;
  if (EnvNamesThisShim("NVTX_INJECTION64_PATH")) {
    *note = "; NVTX: recorded from the process's first NVTX call";
    return true;
  }
  *note =
      "; no NVTX: NVTX_INJECTION64_PATH does not name the shim (start the job with "
      "gpuos-trace --prepare to record NVTX ranges)";
  return false;
}

std::string Attach(const std::string& agent_socket, bool* attached) {
  std::string error;
  if (!OpenChannel(agent_socket, &error)) return ErrorReply(error);
  Origin origin;
  {
    std::lock_guard<std::mutex> lock(C().mu);
    origin = C().origin;
  }
  const std::string mode = origin == Origin::kPrepared ? "prepared process" : "injected shim";
  SetStatusPrefix("attached (" + mode + "): ");
  std::string cupti_status;
  bool cupti = false;
#ifdef GPUOS_SHIM_HAS_CUPTI
  cupti = StartCuptiForAttach(&cupti_status);
#else
  cupti_status = "this shim was built without CUPTI headers: CUDA activity not recorded";
  SetCuptiStatus(false, cupti_status);
#endif
  std::string nvtx_note;
  const bool nvtx = NvtxWillRecord(&nvtx_note);
  *attached = true;
  Log("attached to %s: cupti=%d nvtx=%d", agent_socket.c_str(), cupti, nvtx);
  return AttachedReply(cupti, nvtx, mode + "; " + cupti_status + nvtx_note);
}

uint64_t Detach() {
#ifdef GPUOS_SHIM_HAS_CUPTI
  StopCuptiForDetach();
#endif
  const uint64_t sent = CloseChannel();
  ResetCaptureAfterDetach();
  Log("detached after %llu events", static_cast<unsigned long long>(sent));
  return sent;
}

// Returns false when the request was not understood.
bool Handle(int conn, std::string_view message, bool* attached) {
  ControlRequest request = ParseControlRequest(message);
  switch (request.kind) {
    case ControlRequest::kAttach:
      if (*attached) {
        Reply(conn, ErrorReply("already attached; send \"detach\" first"));
      } else {
        Reply(conn, Attach(request.agent_socket, attached));
      }
      break;
    case ControlRequest::kDetach: {
      const uint64_t sent = *attached ? Detach() : 0;
      *attached = false;
      Reply(conn, DetachedReply(sent));
      break;
    }
    case ControlRequest::kCapture:
      Reply(conn, HandleCaptureRequest(request.capture));
      break;
    case ControlRequest::kInvalid:
      Reply(conn, ErrorReply(request.error));
      return false;
  }
  return true;
}

void SetConnection(int fd) {
  std::lock_guard<std::mutex> lock(C().mu);
  C().conn_fd = fd;
}

// A second agent while one is connected: told why, at once and again for
// each request it sends (it may read only after sending), then dropped
// when it hangs up.  Only the newest few are kept waiting.
constexpr size_t kMaxTurnedAway = 4;
const char kBusy[] = "another gpuos-trace is already connected to this process";

void AcceptPeers(int listen_fd, int* conn, std::vector<int>* turned_away) {
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
        !PeerAllowed(peer.uid, getuid(), geteuid())) {
      Log("refused a control connection from uid %d (pid %d)", static_cast<int>(peer.uid),
          static_cast<int>(peer.pid));
      close(fd);
      continue;
    }
    if (*conn >= 0) {
      Reply(fd, ErrorReply(kBusy));
      if (turned_away->size() >= kMaxTurnedAway) {
        close(turned_away->front());
        turned_away->erase(turned_away->begin());
      }
      turned_away->push_back(fd);
      continue;
    }
    *conn = fd;
    SetConnection(fd);
  }
}

// The connections turned away (`polled`: theirs, in order): a capture
// request is served (`gpuos-trace ctl capture` while an agent is
// attached), anything else told why not; the ones that hung up go.
void ServeTurnedAway(const pollfd* polled, std::vector<int>* turned_away) {
  std::vector<int> still_waiting;
  for (size_t i = 0; i < turned_away->size(); ++i) {
    const int fd = (*turned_away)[i];
    if (polled[i].revents != 0) {
      char buffer[4096];
      ssize_t got = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (got > 0) {
        const ControlRequest request = ParseControlRequest(std::string_view(buffer, static_cast<size_t>(got)));
        Reply(fd, request.kind == ControlRequest::kCapture ? HandleCaptureRequest(request.capture)
                                                          : ErrorReply(kBusy));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fd);
        continue;
      }
    }
    still_waiting.push_back(fd);
  }
  turned_away->swap(still_waiting);
}

struct ListenerFds {
  int listen_fd;
  int wake_fd;
};

void* ControlMain(void* raw) {
  const ListenerFds fds = *static_cast<ListenerFds*>(raw);
  delete static_cast<ListenerFds*>(raw);
  int conn = -1;
  bool attached = false;
  uint64_t conn_active_ns = 0;  // the connection's start or its last request
  int invalid_requests = 0;     // in a row, on this connection
  std::vector<int> turned_away;
  bool unmaps_pending = ServiceUnmaps();
  for (;;) {
    pollfd polled[3 + kMaxTurnedAway] = {
        {fds.listen_fd, POLLIN, 0}, {fds.wake_fd, POLLIN, 0}, {conn, POLLIN, 0}};
    for (size_t i = 0; i < turned_away.size(); ++i) polled[3 + i] = {turned_away[i], POLLIN, 0};
    // Asleep until something happens, except while a stub page is watched
    // or a connection that has not attached may go idle.
    int timeout_ms = unmaps_pending ? kStubPollMs : -1;
    if (conn >= 0 && !attached) {
      const uint64_t now = NowNs(), idle_end = conn_active_ns + IdleControlNs();
      const int idle_ms = now >= idle_end ? 0 : static_cast<int>((idle_end - now) / 1'000'000 + 1);
      timeout_ms = timeout_ms < 0 ? idle_ms : std::min(timeout_ms, idle_ms);
    }
    int n = poll(polled, 3 + turned_away.size(), timeout_ms);
    if (n < 0) {
      if (errno != EINTR) usleep(100 * 1000);
      continue;
    }
    if (polled[1].revents != 0) {
      uint64_t count;
      if (read(fds.wake_fd, &count, sizeof(count)) < 0) count = 0;
    }
    unmaps_pending = ServiceUnmaps();
    if (conn >= 0 && polled[2].revents != 0) {
      char buffer[4096];
      ssize_t got = recv(conn, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (got > 0) {
        conn_active_ns = NowNs();
        const bool understood = Handle(conn, std::string_view(buffer, static_cast<size_t>(got)), &attached);
        invalid_requests = understood ? 0 : invalid_requests + 1;
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        // The agent went away (or died): the same as "detach".
        if (attached) Detach();
        attached = false;
        SetConnection(-1);
        close(conn);
        conn = -1;
      }
    }
    ServeTurnedAway(polled + 3, &turned_away);
    const bool idle = NowNs() >= conn_active_ns + IdleControlNs();
    if (conn >= 0 && !attached && (idle || invalid_requests >= kMaxInvalidRequests)) {
      Log("dropped a control connection: %s", idle ? "idle without attaching" : "garbage");
      Reply(conn, ErrorReply(idle ? "idle without attaching: disconnected"
                                  : "too many requests not understood: disconnected"));
      SetConnection(-1);
      close(conn);
      conn = -1;
    }
    const int before = conn;
    if ((polled[0].revents & POLLIN) != 0) AcceptPeers(fds.listen_fd, &conn, &turned_away);
    if (conn != before) {
      conn_active_ns = NowNs();
      invalid_requests = 0;
    }
  }
  return nullptr;
}

// ---- Listener life -------------------------------------------------------

void ListenerForkPrepare() { C().mu.lock(); }
void ListenerForkParent() { C().mu.unlock(); }
// Only the forking thread lives on in the child: the listener's thread is
// gone, and the sockets are the parent's.  close() and munmap() are
// async-signal-safe; the child's own listener starts on its next call into
// the shim (RestartListenerIfForked).
void ListenerForkChild() {
  Control& c = C();
  if (c.running) {
    for (int fd : {c.listen_fd, c.wake_fd, c.conn_fd}) {
      if (fd >= 0) close(fd);
    }
    // The stub's thread did not come along, so its page can go here now.
    for (const PendingUnmap& u : c.unmaps) munmap(reinterpret_cast<void*>(u.page), u.size);
    c.unmaps.clear();
    c.listen_fd = c.wake_fd = c.conn_fd = -1;
    c.running = false;
    c.restart_in_child.store(true);
  }
  c.mu.unlock();
}

bool StartListener(Origin origin, std::string* error) {
  // Outside c.mu: a fork in another thread holds glibc's handler list
  // while it waits for c.mu in ListenerForkPrepare.
  static std::once_flag registered;
  std::call_once(registered, [] {
    JoinForkHandling(ForkPart::kControlListener,
                     {ListenerForkPrepare, ListenerForkParent, ListenerForkChild});
  });

  Control& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.origin == Origin::kNone) c.origin = origin;
  if (c.running) return true;
  const std::string name = ControlSocketName(getpid());
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace: sun_path[0] is NUL; the name is not NUL-terminated.
  memcpy(addr.sun_path + 1, name.data(), name.size());
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0 || listen(fd, 8) != 0) {
    *error = "cannot listen on @" + name + ": " + strerror(errno);
    close(fd);
    return false;
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    *error = std::string("eventfd: ") + strerror(errno);
    close(fd);
    return false;
  }
  // The job's signals stay with the job's threads.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  auto* fds = new ListenerFds{fd, wake};
  const int rc = pthread_create(&thread, &attr, ControlMain, fds);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (rc != 0) {
    delete fds;
    close(fd);
    close(wake);
    *error = std::string("cannot start the control thread: ") + strerror(rc);
    return false;
  }
  pthread_setname_np(thread, "gpuos-control");
  c.listen_fd = fd;
  c.wake_fd = wake;
  c.running = true;
  c.possible.store(true);
  Log("listening on @%s", name.c_str());
  return true;
}

// A process started by `gpuos-trace --prepare`: listen from the start.
// (A launched trace, GPUOS_SHIM_SOCKET, records from the start and needs
// no attach.)
// A launched trace with capture windows listens too, for `gpuos-trace ctl
// --pid PID capture N` (an "attach" there is refused: the channel is open).
__attribute__((constructor)) void ListenIfPrepared() {
  const char* capture = getenv("GPUOS_CAPTURE");
  if (LaunchMode() && capture != nullptr && *capture != '\0') {
    C().possible.store(true);
    std::string error;
    if (!StartListener(Origin::kNone, &error)) Log("%s", error.c_str());
    return;
  }
  const char* prepared = getenv("GPUOS_SHIM_PREPARED");
  if (prepared == nullptr || strcmp(prepared, "1") != 0 || LaunchMode()) return;
  C().possible.store(true);
  std::string error;
  if (!StartListener(Origin::kPrepared, &error)) Log("%s", error.c_str());
}

}  // namespace

bool AttachPossible() { return C().possible.load(std::memory_order_relaxed); }

void RestartListenerIfForked() {
  Control& c = C();
  if (!c.restart_in_child.load(std::memory_order_relaxed)) return;
  if (!c.restart_in_child.exchange(false)) return;
  std::string error;
  if (!StartListener(Origin::kNone, &error)) Log("%s", error.c_str());
}

bool EnvNamesThisShim(const char* name) {
  const char* path = getenv(name);
  if (path == nullptr || *path == '\0') return false;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&EnvNamesThisShim), &info) == 0 || info.dli_fname == nullptr) {
    return false;
  }
  struct stat named {}, ours {};
  return stat(path, &named) == 0 && stat(info.dli_fname, &ours) == 0 &&
         named.st_dev == ours.st_dev && named.st_ino == ours.st_ino;
}

}  // namespace gpuos_shim

extern "C" void gpuos_shim_attach_entry(const char* argument, uintptr_t stub_page,
                                        size_t stub_size, int stub_tid) {
  using namespace gpuos_shim;
  std::string error;
  if (!StartListener(Origin::kInjected, &error)) Log("attach entry: %s", error.c_str());
  Log("attach entry (argument \"%s\", stub page %#lx +%zu, thread %d)",
      argument != nullptr ? argument : "", static_cast<unsigned long>(stub_page), stub_size,
      stub_tid);
  if (stub_page != 0 && stub_size != 0) QueueUnmap(stub_page, stub_size, stub_tid);
}
