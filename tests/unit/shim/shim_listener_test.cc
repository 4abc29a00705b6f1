// The shim transport's agent side with real sockets and real processes:
// framing (one EventBatch per message), the peer check, the pid override,
// malformed messages, the socket directory's permissions.
#include "record/shim_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "wire_encoder.h"

namespace gpuos {
namespace {

// Connects to `path` and sends each message; returns 0 on success.
int SendMessages(const std::string& path, const std::vector<std::string>& messages) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  if (fd < 0) return 1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 2;
  for (const std::string& m : messages) {
    if (send(fd, m.data(), m.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(m.size())) return 3;
  }
  close(fd);
  return 0;
}

// An EventBatch of `n` NVTX marks written by the shim's own encoder, each
// claiming pid 4242.
std::string MarkBatch(int n, const std::string& name) {
  gpuos_shim::ProtoWriter batch;
  for (int i = 0; i < n; ++i) {
    gpuos_shim::ProtoWriter mark;
    mark.Bytes(gpuos_shim::field::kNvtxMarkName, name);
    batch.Bytes(gpuos_shim::field::kBatchEvents,
                gpuos_shim::EncodeEvent(1000 + i, 4242, 7, gpuos_shim::field::kEventNvtxMark, mark));
  }
  return batch.data();
}

// Runs `fn` in a child process and waits for it; returns its exit code.
template <typename Fn>
int InChild(Fn fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ShimListenerTest, AcceptsTreeMembersAndOverridesTheirClaimedPid) {
  std::vector<v1::Event> received;
  std::vector<pid_t> asked;
  auto listener = ShimListener::Create(
      getuid(), getgid(),
      [&](pid_t pid, uid_t) {
        asked.push_back(pid);
        return true;
      },
      [&](const v1::Event& e) { received.push_back(e); });
  ASSERT_TRUE(listener.ok()) << listener.status();
  pid_t child = 0;
  pid_t parent = getpid();
  int rc = InChild([&] {
    return SendMessages((*listener)->socket_path(), {MarkBatch(3, "a"), MarkBatch(2, "b")});
  });
  ASSERT_EQ(rc, 0);
  (*listener)->Pump(/*until_closed=*/true);
  ASSERT_EQ(received.size(), 5u);
  ASSERT_EQ(asked.size(), 1u);
  child = asked[0];
  EXPECT_NE(child, parent);
  for (size_t i = 0; i < received.size(); ++i) {
    EXPECT_EQ(received[i].pid(), static_cast<uint32_t>(child)) << "claimed pid must be replaced";
    EXPECT_EQ(received[i].tid(), 7u);
    EXPECT_EQ(received[i].nvtx_mark().name(), i < 3 ? "a" : "b");
    EXPECT_EQ(received[i].ts_ns(), 1000u + (i < 3 ? i : i - 3));
  }
  EXPECT_EQ((*listener)->connections(), 1u);
  EXPECT_EQ((*listener)->rejected_peers(), 0u);
}

TEST(ShimListenerTest, RejectsPeersOutsideTheTree) {
  std::vector<v1::Event> received;
  auto listener = ShimListener::Create(
      getuid(), getgid(), [](pid_t, uid_t) { return false; },
      [&](const v1::Event& e) { received.push_back(e); });
  ASSERT_TRUE(listener.ok());
  InChild([&] { return SendMessages((*listener)->socket_path(), {MarkBatch(1, "x")}); });
  (*listener)->Pump(/*until_closed=*/true);
  EXPECT_TRUE(received.empty());
  EXPECT_EQ((*listener)->rejected_peers(), 1u);
}

TEST(ShimListenerTest, CountsMalformedMessagesAndKeepsGoodOnes) {
  std::vector<v1::Event> received;
  auto listener = ShimListener::Create(
      getuid(), getgid(), [](pid_t, uid_t) { return true; },
      [&](const v1::Event& e) { received.push_back(e); });
  ASSERT_TRUE(listener.ok());
  std::string garbage = "\x0a\xff\xff\xff\xff\x0f garbage";
  InChild([&] {
    return SendMessages((*listener)->socket_path(), {garbage, MarkBatch(2, "ok")});
  });
  (*listener)->Pump(/*until_closed=*/true);
  EXPECT_EQ(received.size(), 2u);
  EXPECT_EQ((*listener)->malformed_messages(), 1u);
}

TEST(ShimListenerTest, SocketDirectoryIsPrivateToItsOwner) {
  auto listener = ShimListener::Create(getuid(), getgid(), [](pid_t, uid_t) { return true; },
                                       [](const v1::Event&) {});
  ASSERT_TRUE(listener.ok());
  std::string path = (*listener)->socket_path();
  std::string dir = path.substr(0, path.rfind('/'));
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, getuid());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0077, 0u);
  listener->reset();
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << "the directory must be removed";
}

TEST(ShimListenerTest, DescendantCheckFollowsTheProcessTree) {
  EXPECT_TRUE(IsDescendantOf(getpid(), getpid()));
  EXPECT_TRUE(IsDescendantOf(getpid(), 1));
  EXPECT_FALSE(IsDescendantOf(getppid(), getpid()));
  pid_t me = getpid();
  int rc = InChild([&] {
    // A grandchild descends from this test; this test does not descend from it.
    pid_t grandchild = fork();
    if (grandchild == 0) _exit(IsDescendantOf(getpid(), me) && !IsDescendantOf(me, getpid()) ? 0 : 1);
    int status = 0;
    waitpid(grandchild, &status, 0);
    return WEXITSTATUS(status);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(IsDescendantOf(999999999, getpid()));
}

}  // namespace
}  // namespace gpuos
