// The shim's control protocol (cupti_shim/control_protocol.h): requests
// parsed strictly, replies in the exact form the agent matches on, the peer
// rule, the socket name.
#include "control_protocol.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

TEST(ShimControlProtocolTest, ParsesAttachWithItsSocketPath) {
  ControlRequest r = ParseControlRequest("attach /tmp/gpuos-trace.Ab12/shim.sock");
  EXPECT_EQ(r.kind, ControlRequest::kAttach);
  EXPECT_EQ(r.agent_socket, "/tmp/gpuos-trace.Ab12/shim.sock");
  // Everything after the first space is the path, spaces included.
  r = ParseControlRequest("attach /tmp/a dir/s.sock\n");
  EXPECT_EQ(r.kind, ControlRequest::kAttach);
  EXPECT_EQ(r.agent_socket, "/tmp/a dir/s.sock");
}

TEST(ShimControlProtocolTest, ParsesDetach) {
  EXPECT_EQ(ParseControlRequest("detach").kind, ControlRequest::kDetach);
  EXPECT_EQ(ParseControlRequest("detach\r\n").kind, ControlRequest::kDetach);
}

TEST(ShimControlProtocolTest, RejectsMalformedRequestsWithAReason) {
  for (const char* bad : {"", "attach", "attach ", "attachx /p", "ATTACH /p", "detach now",
                          "detached 3", "hello"}) {
    ControlRequest r = ParseControlRequest(bad);
    EXPECT_EQ(r.kind, ControlRequest::kInvalid) << bad;
    EXPECT_FALSE(r.error.empty()) << bad;
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << bad;
  }
  EXPECT_NE(ParseControlRequest("attach").error.find("attach <path>"), std::string::npos);
}

TEST(ShimControlProtocolTest, SocketPathMustFitSockaddrUn) {
  const std::string longest(kMaxAgentSocketPath, 'p');
  EXPECT_EQ(ParseControlRequest("attach " + longest).kind, ControlRequest::kAttach);
  ControlRequest r = ParseControlRequest("attach " + longest + "p");
  EXPECT_EQ(r.kind, ControlRequest::kInvalid);
  EXPECT_NE(r.error.find("longer than 107"), std::string::npos) << r.error;
  EXPECT_EQ(ParseControlRequest(std::string("attach /tmp/a\0b", 15)).kind,
            ControlRequest::kInvalid);
}

TEST(ShimControlProtocolTest, RepliesAreOneLineInTheAgreedForm) {
  EXPECT_EQ(AttachedReply(true, false, "CUPTI 130000 from /x"),
            "attached cupti=1 nvtx=0 CUPTI 130000 from /x");
  EXPECT_EQ(AttachedReply(false, true, "a\nb\tc"), "attached cupti=0 nvtx=1 a b c");
  EXPECT_EQ(DetachedReply(0), "detached 0");
  EXPECT_EQ(DetachedReply(123456789012ull), "detached 123456789012");
  EXPECT_EQ(ErrorReply("no\nway"), "error no way");
}

TEST(ShimControlProtocolTest, PeersAreRootOrTheProcesssOwnUser) {
  EXPECT_TRUE(PeerAllowed(0, 1000, 1000));
  EXPECT_TRUE(PeerAllowed(1000, 1000, 1000));
  EXPECT_TRUE(PeerAllowed(1000, 1000, 0));  // a setuid-root program run by 1000
  EXPECT_TRUE(PeerAllowed(1001, 1000, 1001));
  EXPECT_FALSE(PeerAllowed(1001, 1000, 1000));
  EXPECT_FALSE(PeerAllowed(65534, 0, 0));
}

TEST(ShimControlProtocolTest, SocketNameCarriesThePid) {
  EXPECT_EQ(ControlSocketName(4242), "gpuos-shim.4242");
  EXPECT_EQ(ControlSocketName(1), "gpuos-shim.1");
}

}  // namespace
}  // namespace gpuos_shim
