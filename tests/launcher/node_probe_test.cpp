#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

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

// A listening socket answers; a port nobody listens on refuses; both are decided well before the timeout. More nodes
// than one round holds are all probed.
// The rule for a link at a trickle: the fastest of a node's answers at least 10 ms and 20x the nodes' median.
TEST(NodeProbe, ANodeFarSlowerThanTheOthersIsSlow) {
  const std::vector<NodeAnswer> fast = {{"n1", 0.08}, {"n2", 0.12}, {"n3", 0.10}, {"n4", 0.09}};
  EXPECT_TRUE(slow_answers(fast).empty());
  std::vector<NodeAnswer> one_slow = fast;
  one_slow[1].ms = 35.0;
  const auto slow = slow_answers(one_slow);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].node, "n2");
  EXPECT_DOUBLE_EQ(slow[0].answer_ms, 35.0);
  EXPECT_NEAR(slow[0].typical_ms, 0.10, 1e-9);
  // Slow, but everywhere alike (a busy or distant fabric): nobody stands out.
  EXPECT_TRUE(slow_answers({{"n1", 30.0}, {"n2", 45.0}, {"n3", 40.0}}).empty());
  // Far slower than the others, but under 10 ms: a scheduling hiccup, not a degraded link.
  EXPECT_TRUE(slow_answers({{"n1", 0.1}, {"n2", 9.0}, {"n3", 0.1}}).empty());
  // Alone there is nothing to compare with.
  EXPECT_TRUE(slow_answers({{"n1", 500.0}}).empty());
  // Slowest first.
  const auto two = slow_answers({{"n1", 0.1}, {"n2", 20.0}, {"n3", 0.1}, {"n4", 80.0}, {"n5", 0.2}});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].node, "n4");
  EXPECT_EQ(two[1].node, "n2");
}

TEST(NodeProbe, AListeningNodeAnswersAndAClosedPortDoesNot) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener, 1024), 0);  // room for every probe below: nothing accepts them
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
  // A name that does not resolve is no evidence against the node.
  EXPECT_EQ(lost, std::vector<std::string>{"down"});
  // With the answers' times: nodes of one host answer alike, none is slow.
  const NodeProbeResult probed = probe_nodes(
      {{"up", "127.0.0.1", open_port}, {"up-too", "127.0.0.1", open_port}, {"down", "127.0.0.1", closed_port}},
      std::chrono::milliseconds(5000));
  EXPECT_EQ(probed.unreachable, std::vector<std::string>{"down"});
  EXPECT_TRUE(probed.slow.empty()) << probed.slow.front().node << " " << probed.slow.front().answer_ms;

  // 300 nodes, more than one round of 256, all but the last on the listener (whose backlog, capped by the kernel's
  // somaxconn, must hold them: nothing accepts).
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  if (somaxconn >= 300) {
    std::vector<NodeAddress> many;
    for (int i = 0; i < 300; ++i)
      many.push_back({"n" + std::to_string(i), "127.0.0.1", i == 299 ? closed_port : open_port});
    EXPECT_EQ(unreachable_nodes(many, std::chrono::milliseconds(5000)), std::vector<std::string>{"n299"});
  } else {
    std::printf("somaxconn %d: the test of several rounds needs a listen backlog of 300\n", somaxconn);
  }
  close(listener);
}

}  // namespace
}  // namespace tenax::launch
