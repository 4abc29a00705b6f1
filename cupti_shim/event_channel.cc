// The shim's bounded queue and sender thread; see event_channel.h.
#include "event_channel.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "fork_handlers.h"
#include "wire_encoder.h"

namespace gpuos_shim {
namespace {

// Bounds: what one process may hold while the agent is slow, and the size
// of one message (well under the socket's default send buffer).
constexpr size_t kMaxQueuedBytes = 32u << 20;
constexpr size_t kMaxMessageBytes = 64u << 10;
constexpr int kFlushIntervalMs = 100;
constexpr int kStatsIntervalMs = 1000;
constexpr int kReconnectIntervalMs = 1000;

// Events end to end in one buffer, each after its length (4 bytes, host
// order): a submit appends to memory the queue already owns, with no
// allocation of its own once the buffer has grown, and the buffers are
// handed back and forth between the queue and the sender with their
// capacity.  What an application thread pays for an event is mostly this
// copy.  An entry is an encoded Event, or (length's top bit set) a
// deferred one: its encoder's address, then its raw record.
class EventQueue {
 public:
  static constexpr uint32_t kDeferredBit = 1u << 31;

  void Append(std::string_view event) {
    AppendSize(static_cast<uint32_t>(event.size()));
    bytes_.append(event.data(), event.size());
    ++count_;
  }
  // `parts_size`: the parts' sizes summed.
  void AppendDeferred(DeferredEncoder encode, std::initializer_list<std::string_view> parts, size_t parts_size) {
    AppendSize(static_cast<uint32_t>(sizeof(encode) + parts_size) | kDeferredBit);
    bytes_.append(reinterpret_cast<const char*>(&encode), sizeof(encode));
    for (std::string_view part : parts) bytes_.append(part.data(), part.size());
    ++count_;
  }
  // fn(encoded event) for each entry; deferred ones are encoded first, in
  // `scratch`.
  template <typename Fn>
  void ForEach(ProtoWriter& scratch, Fn fn) const {
    for (size_t at = 0; at + sizeof(uint32_t) <= bytes_.size();) {
      uint32_t size = 0;
      memcpy(&size, bytes_.data() + at, sizeof(size));
      at += sizeof(size);
      const bool deferred = (size & kDeferredBit) != 0;
      size &= ~kDeferredBit;
      std::string_view entry(bytes_.data() + at, size);
      at += size;
      if (!deferred) {
        fn(entry);
        continue;
      }
      DeferredEncoder encode = nullptr;
      memcpy(&encode, entry.data(), sizeof(encode));
      encode(entry.substr(sizeof(encode)), &scratch);
      fn(std::string_view(scratch.data()));
    }
  }
  size_t bytes() const { return bytes_.size(); }
  bool empty() const { return count_ == 0; }
  void Clear() {
    bytes_.clear();
    count_ = 0;
  }
  // Gives back the memory of a buffer that grew past what a flush
  // interval needs (a burst), so that it is not kept for good.
  void ClearAndTrim() {
    Clear();
    if (bytes_.capacity() > kKeptCapacity) std::string().swap(bytes_);
  }
  void Swap(EventQueue& other) {
    bytes_.swap(other.bytes_);
    std::swap(count_, other.count_);
  }

 private:
  void AppendSize(uint32_t size) { bytes_.append(reinterpret_cast<const char*>(&size), sizeof(size)); }

  static constexpr size_t kKeptCapacity = 4u << 20;
  std::string bytes_;
  size_t count_ = 0;
};

struct Channel {
  // Lock order: send_mu, then mu, then status_mu.
  std::mutex mu;  // guards queue, sender_running, socket_fd, path
  EventQueue queue;
  bool sender_running = false;
  int socket_fd = -1;
  std::string path;  // the agent's socket; empty while closed
  uint64_t last_connect_attempt_ms = 0;
  pthread_t thread{};
  // Serializes sends, so a flush from exit() and the sender thread never
  // interleave on the socket.
  std::mutex send_mu;

  bool launch = false;            // GPUOS_SHIM_SOCKET at load; never changes
  std::atomic<bool> open{false};  // written under mu; read anywhere

  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> dropped_queue_full{0};
  std::atomic<uint64_t> dropped_send_failed{0};
  std::atomic<uint64_t> cupti_dropped{0};
  std::atomic<bool> cupti_active{false};
  std::atomic<bool> nvtx_active{false};
  std::atomic<bool> stats_dirty{false};
  // Flush requests of exiting threads (RequestFlushAndWait) and the last one
  // the sender thread served; the first is also the futex it waits on.
  std::atomic<uint32_t> flush_requests{0};
  std::atomic<uint32_t> flushes_done{0};
  std::mutex status_mu;
  std::string cupti_status;
  std::string status_prefix;
};

Channel& TheChannel() {
  // Never destroyed: other libraries' exit handlers may still submit.
  static Channel* channel = [] {
    auto* ch = new Channel();
    const char* path = getenv("GPUOS_SHIM_SOCKET");
    if (path != nullptr && *path != '\0') {
      ch->path = path;
      ch->launch = true;
      ch->open = true;
    }
    return ch;
  }();
  return *channel;
}

uint64_t NowMs() { return MonotonicNs() / 1'000'000; }

thread_local uint32_t t_tid = 0;
std::atomic<uint32_t> g_pid{0};

// A connected SOCK_SEQPACKET socket to `path`, or -1 (errno set).
int ConnectTo(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.data(), path.size());
  // A send blocked on a slow agent gives up after a second; the events
  // are then counted as dropped.
  timeval timeout{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Connects if not connected (rate-limited).  Called with send_mu held.
int Connection(Channel& ch) {
  std::lock_guard<std::mutex> lock(ch.mu);
  if (ch.socket_fd >= 0) return ch.socket_fd;
  if (!ch.open.load()) return -1;
  uint64_t now = NowMs();
  if (ch.last_connect_attempt_ms && now - ch.last_connect_attempt_ms < kReconnectIntervalMs) return -1;
  ch.last_connect_attempt_ms = now;
  ch.socket_fd = ConnectTo(ch.path);
  return ch.socket_fd;
}

void Disconnect(Channel& ch, int fd) {
  std::lock_guard<std::mutex> lock(ch.mu);
  if (ch.socket_fd == fd) {
    close(fd);
    ch.socket_fd = -1;
  }
}

std::string EncodeStats(Channel& ch) {
  ProtoWriter stats;
  stats.Uint(field::kStatsSent, ch.sent.load());
  stats.Uint(field::kStatsDroppedQueue, ch.dropped_queue_full.load());
  stats.Uint(field::kStatsDroppedSend, ch.dropped_send_failed.load());
  stats.Uint(field::kStatsCuptiDropped, ch.cupti_dropped.load());
  stats.Bool(field::kStatsCuptiActive, ch.cupti_active.load());
  {
    std::lock_guard<std::mutex> lock(ch.status_mu);
    stats.Text(field::kStatsCuptiStatus, ch.status_prefix + ch.cupti_status);
  }
  stats.Bool(field::kStatsNvtxActive, ch.nvtx_active.load());
  return EncodeEvent(MonotonicNs(), CurrentPid(), CurrentTid(),
                     field::kEventShimStats, stats);
}

// Sends `events` as EventBatch messages on `fd` (-1: none); counts what
// could not be sent.  Returns the fd, or -1 once a send failed.  Called
// with send_mu held.
int SendOn(Channel& ch, int fd, const EventQueue& events) {
  ProtoWriter batch, deferred;
  size_t in_batch = 0;
  auto send_batch = [&]() {
    if (in_batch == 0) return;
    bool ok = false;
    if (fd >= 0) {
      ssize_t n;
      do {
        n = send(fd, batch.data().data(), batch.data().size(), MSG_NOSIGNAL);
      } while (n < 0 && errno == EINTR);
      ok = n == static_cast<ssize_t>(batch.data().size());
      if (!ok) fd = -1;
    }
    (ok ? ch.sent : ch.dropped_send_failed).fetch_add(in_batch);
    batch.Clear();
    in_batch = 0;
  };
  events.ForEach(deferred, [&](std::string_view event) {
    if (batch.data().size() + event.size() + 16 > kMaxMessageBytes) send_batch();
    batch.Bytes(field::kBatchEvents, event);
    ++in_batch;
  });
  send_batch();
  return fd;
}

void SendEvents(Channel& ch, const EventQueue& events) {
  std::lock_guard<std::mutex> send_lock(ch.send_mu);
  // Closed meanwhile (detach): CloseChannel has sent the last of it.
  if (!ch.open.load()) return;
  int fd = Connection(ch);
  if (fd >= 0 && SendOn(ch, fd, events) < 0) Disconnect(ch, fd);
  if (fd < 0) SendOn(ch, -1, events);  // counts them as dropped
}

// Swaps the queue with `events` (cleared first): the queue goes on in the
// caller's old buffer.
void TakeQueue(Channel& ch, EventQueue* events) {
  events->ClearAndTrim();
  std::lock_guard<std::mutex> lock(ch.mu);
  events->Swap(ch.queue);
}

void* SenderMain(void*) {
  Channel& ch = TheChannel();
  uint64_t last_stats = 0;
  EventQueue events;  // passed back and forth with the queue's
  for (;;) {
    // Every interval, or at once for an exiting thread's request.
    const uint32_t requested = ch.flush_requests.load();
    timespec pause{0, kFlushIntervalMs * 1'000'000L};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ch.flush_requests), FUTEX_WAIT_PRIVATE, requested, &pause,
            nullptr, 0);
    const uint32_t serving = ch.flush_requests.load();
    {
      // Detached: nothing runs in the process on our behalf.
      std::lock_guard<std::mutex> lock(ch.mu);
      if (!ch.open.load()) {
        ch.sender_running = false;
        return nullptr;
      }
    }
    TakeQueue(ch, &events);
    uint64_t now = NowMs();
    if (ch.stats_dirty.exchange(false) || (now - last_stats >= kStatsIntervalMs && !events.empty())) {
      events.Append(EncodeStats(ch));
      last_stats = now;
    }
    if (!events.empty()) SendEvents(ch, events);
    ch.flushes_done.store(serving);
  }
  return nullptr;
}

// Called with ch.mu held.
void StartSenderLocked(Channel& ch) {
  if (ch.sender_running) return;
  ch.sender_running = true;
  // Signals stay with the application's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&ch.thread, &attr, SenderMain, nullptr) != 0) ch.sender_running = false;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (ch.sender_running) pthread_setname_np(ch.thread, "gpuos-shim");
}

void FlushAtExit() { FlushEvents(); }

}  // namespace

bool RequestFlushAndWait(int timeout_ms) {
  Channel& ch = TheChannel();
  if (!ch.open.load()) return false;
  const uint32_t want = ch.flush_requests.fetch_add(1) + 1;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ch.flush_requests), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  for (int waited = 0; waited < timeout_ms; ++waited) {
    if (static_cast<int32_t>(ch.flushes_done.load() - want) >= 0) return true;
    timespec pause{0, 1'000'000L};
    nanosleep(&pause, nullptr);
  }
  return false;
}

namespace {

// fork(): the child keeps only what it makes itself.  Its queue copy holds
// the parent's events (the parent sends them), its socket is the parent's
// connection, and the sender thread did not survive.  An attached parent's
// child starts detached: the agent attached to the parent, not to it.
void ChannelForkPrepare() {
  Channel& ch = TheChannel();
  ch.send_mu.lock();
  ch.mu.lock();
  ch.status_mu.lock();
}
void ChannelForkParent() {
  Channel& ch = TheChannel();
  ch.status_mu.unlock();
  ch.mu.unlock();
  ch.send_mu.unlock();
}
void ChannelForkChild() {
  Channel& ch = TheChannel();
  ch.queue.ClearAndTrim();
  ch.sender_running = false;
  if (ch.socket_fd >= 0) close(ch.socket_fd);
  ch.socket_fd = -1;
  ch.last_connect_attempt_ms = 0;
  ch.sent = 0;
  ch.dropped_queue_full = 0;
  ch.dropped_send_failed = 0;
  ch.cupti_dropped = 0;
  ch.cupti_active = false;
  if (!ch.launch) {
    ch.open = false;
    ch.path.clear();
    ch.status_prefix.clear();
  }
  t_tid = 0;
  g_pid = 0;
  ch.status_mu.unlock();
  ch.mu.unlock();
  ch.send_mu.unlock();
}

struct Registration {
  Registration() {
    JoinForkHandling(ForkPart::kEventChannel,
                     {ChannelForkPrepare, ChannelForkParent, ChannelForkChild});
    atexit(FlushAtExit);
  }
};

void EnsureRegistered() { static Registration registration; }

}  // namespace

bool ChannelConfigured() { return TheChannel().open.load(std::memory_order_relaxed); }

bool LaunchMode() { return TheChannel().launch; }

uint32_t CurrentTid() {
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

bool ChannelUsedByThisProcess() {
  const uint32_t pid = g_pid.load(std::memory_order_relaxed);
  return pid != 0 && pid == static_cast<uint32_t>(syscall(SYS_getpid));
}

uint32_t CurrentPid() {
  uint32_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    EnsureRegistered();  // the fork handler that forgets it in a child
    pid = static_cast<uint32_t>(getpid());
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// Puts `size` bytes into the queue through append(queue), or counts them
// as dropped when the queue is at its bound.
template <typename Append>
void Enqueue(size_t size, Append append) {
  Channel& ch = TheChannel();
  if (!ch.open.load(std::memory_order_relaxed)) return;
  EnsureRegistered();
  std::lock_guard<std::mutex> lock(ch.mu);
  if (!ch.open.load()) return;  // detached meanwhile
  if (ch.queue.bytes() + size > kMaxQueuedBytes) {
    ch.dropped_queue_full.fetch_add(1);
    return;
  }
  append(ch.queue);
  StartSenderLocked(ch);
}

}  // namespace

void SubmitEvent(std::string_view encoded_event) {
  Enqueue(encoded_event.size(), [&](EventQueue& queue) { queue.Append(encoded_event); });
}

void SubmitDeferred(DeferredEncoder encode, std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view part : parts) size += part.size();
  Enqueue(size, [&](EventQueue& queue) { queue.AppendDeferred(encode, parts, size); });
}

void FlushEvents() {
  if (!ChannelConfigured()) return;
  Channel& ch = TheChannel();
  EventQueue events;
  TakeQueue(ch, &events);
  events.Append(EncodeStats(ch));
  SendEvents(ch, events);
}

bool OpenChannel(const std::string& agent_socket_path, std::string* error) {
  Channel& ch = TheChannel();
  if (ch.launch) {
    *error = "this process is already traced by the gpuos-trace that launched it (GPUOS_SHIM_SOCKET)";
    return false;
  }
  // Before taking our locks: registering a fork handler waits for a fork
  // in progress, whose handlers wait for our locks.
  EnsureRegistered();
  std::lock_guard<std::mutex> send_lock(ch.send_mu);
  if (ch.open.load()) {
    *error = "already attached";
    return false;
  }
  int fd = ConnectTo(agent_socket_path);
  if (fd < 0) {
    *error = "cannot connect to the agent's socket " + agent_socket_path + ": " + strerror(errno);
    return false;
  }
  std::lock_guard<std::mutex> lock(ch.mu);
  ch.path = agent_socket_path;
  ch.socket_fd = fd;
  ch.last_connect_attempt_ms = 0;
  ch.queue.ClearAndTrim();
  ch.sent = 0;
  ch.dropped_queue_full = 0;
  ch.dropped_send_failed = 0;
  ch.cupti_dropped = 0;
  ch.stats_dirty = true;  // the agent hears the mode and status at once
  ch.open = true;
  StartSenderLocked(ch);
  return true;
}

uint64_t CloseChannel() {
  Channel& ch = TheChannel();
  if (ch.launch) return 0;
  std::lock_guard<std::mutex> send_lock(ch.send_mu);
  EventQueue events;
  int fd = -1;
  std::string path;
  {
    std::lock_guard<std::mutex> lock(ch.mu);
    if (!ch.open.load()) return 0;
    // From here SubmitEvent discards; what made it in goes out below.
    ch.open = false;
    events.Swap(ch.queue);
    fd = ch.socket_fd;
    ch.socket_fd = -1;
    path.swap(ch.path);
  }
  events.Append(EncodeStats(ch));
  if (fd < 0) fd = ConnectTo(path);
  SendOn(ch, fd, events);
  if (fd >= 0) close(fd);
  {
    std::lock_guard<std::mutex> lock(ch.status_mu);
    ch.status_prefix.clear();
  }
  return ch.sent.load();
}

void SetCuptiStatus(bool active, const std::string& status) {
  Channel& ch = TheChannel();
  // The status must reach the agent even if this process records nothing.
  if (ch.open.load()) EnsureRegistered();
  ch.cupti_active = active;
  {
    std::lock_guard<std::mutex> lock(ch.status_mu);
    ch.cupti_status = status;
  }
  ch.stats_dirty = true;
}

void SetStatusPrefix(const std::string& prefix) {
  Channel& ch = TheChannel();
  std::lock_guard<std::mutex> lock(ch.status_mu);
  ch.status_prefix = prefix;
}

void SetNvtxActive() {
  TheChannel().nvtx_active = true;
  TheChannel().stats_dirty = true;
}

bool NvtxActive() { return TheChannel().nvtx_active.load(); }

void AddCuptiDroppedRecords(uint64_t count) {
  if (count) TheChannel().cupti_dropped.fetch_add(count);
}

void AddShimDroppedEvents(uint64_t count) {
  if (count) TheChannel().dropped_queue_full.fetch_add(count);
}

}  // namespace gpuos_shim
