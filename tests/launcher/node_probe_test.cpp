#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "node_probe.hpp"

namespace tenax::launch {
namespace {

TEST(NodeProbe, ParsesScontrolsNodeLines) {
  const std::string output =
      "NodeName=n1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.1.2.1 NodeHostName=localhost Port=39108 State=IDLE\n"
      "NodeName=n2 NodeAddr=10.1.2.2 NodeHostName=localhost State=DOWN+NOT_RESPONDING\n"  // default port
      "NodeName=n3 NodeAddr=10.1.2.3 Port=70000\n"                                        // no such port: skipped
      "NodeName=n4 SomeNodeAddr=x\n"                                                      // no NodeAddr: skipped
      "garbage\n";
  const std::vector<NodeAddress> a = parse_node_addresses(output);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].node, "n1");
  EXPECT_EQ(a[0].address, "10.1.2.1");
  EXPECT_EQ(a[0].port, 39108);
  EXPECT_EQ(a[1].node, "n2");
  EXPECT_EQ(a[1].port, 6818);
}

// A listening socket answers; a port nobody listens on refuses; both are decided well before the timeout.
TEST(NodeProbe, AListeningNodeAnswersAndAClosedPortDoesNot) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t size = sizeof address;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const int open_port = ntohs(address.sin_port);
  // A port that was just free: bound, then closed without listening.
  const int closed = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in other{};
  other.sin_family = AF_INET;
  other.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(closed, reinterpret_cast<sockaddr*>(&other), sizeof other), 0);
  size = sizeof other;
  ASSERT_EQ(getsockname(closed, reinterpret_cast<sockaddr*>(&other), &size), 0);
  const int closed_port = ntohs(other.sin_port);
  close(closed);

  std::vector<std::string> lost = unreachable_nodes(
      {{"up", "127.0.0.1", open_port}, {"down", "127.0.0.1", closed_port}, {"nameless", "no.such.host.invalid", 1}},
      std::chrono::milliseconds(5000));
  std::sort(lost.begin(), lost.end());
  EXPECT_EQ(lost, (std::vector<std::string>{"down", "nameless"}));
  close(listener);
}

}  // namespace
}  // namespace tenax::launch
