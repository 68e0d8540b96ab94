// Who keeps whose node-local copy (checkpoint/local_tier.hpp, partner_ranks): a ring over the nodes that alternates
// failure domains (leaf switches) wherever their sizes allow.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/local_tier.hpp"

namespace {

using tenax::ckpt::leaf_switch;
using tenax::ckpt::partner_ranks;

// Two ranks per node; node and switch of each rank.
std::vector<std::string> per_rank(const std::vector<std::string>& per_node) {
  std::vector<std::string> out;
  for (const auto& v : per_node) {
    out.push_back(v);
    out.push_back(v);
  }
  return out;
}

TEST(PartnerRanks, WithoutDomainsTheNextNodeKeepsTheCopies) {
  const auto nodes = per_rank({"n1", "n2", "n3", "n4"});
  EXPECT_EQ(partner_ranks(nodes), (std::vector<int>{2, 3, 4, 5, 6, 7, 0, 1}));
  EXPECT_EQ(partner_ranks(nodes, per_rank({"s", "s", "s", "s"})), partner_ranks(nodes)) << "one domain: the same";
  EXPECT_EQ(partner_ranks(per_rank({"n1"})), (std::vector<int>{-1, -1})) << "one node: no partner";
}

TEST(PartnerRanks, APartnerLiesUnderAnotherSwitchWheneverThereIsOne) {
  // n1, n2 under s1; n3, n4 under s2 (the lab's topology): the ring n1 n3 n2 n4.
  const auto nodes = per_rank({"n1", "n2", "n3", "n4"});
  const auto switches = per_rank({"s1", "s1", "s2", "s2"});
  const std::vector<int> partner = partner_ranks(nodes, switches);
  EXPECT_EQ(partner, (std::vector<int>{4, 5, 6, 7, 2, 3, 0, 1}));
  for (std::size_t r = 0; r < partner.size(); ++r)
    EXPECT_NE(switches[r], switches[partner[r]]) << "rank " << r;

  // Uneven switches: no node partners inside its switch while no switch holds more than half of the nodes; beyond
  // that only as many as must. Every node receives exactly one node's copies (a ring).
  struct Case {
    std::vector<std::string> nodes, switches;
    int same_switch;
  };
  const std::vector<Case> cases = {
      {{"a1", "a2", "a3", "b1", "c1", "c2"}, {"a", "a", "a", "b", "c", "c"}, 0},
      {{"a1", "b1", "c1", "a2"}, {"a", "b", "c", "a"}, 0},
      {{"b1", "a1", "a2", "c1", "b2"}, {"b", "a", "a", "c", "b"}, 0},
      {{"a1", "a2", "a3", "b1"}, {"a", "a", "a", "b"}, 2},  // 3 of 4 under a: two a-a neighbours at least
  };
  for (const Case& c : cases) {
    const auto domains = per_rank(c.switches);
    const std::vector<int> p = partner_ranks(per_rank(c.nodes), domains);
    int same = 0;
    for (std::size_t r = 0; r < p.size(); r += 2)
      same += domains[r] == domains[p[r]];
    EXPECT_EQ(same, c.same_switch) << c.nodes.size() << " nodes starting " << c.nodes[0];
    std::vector<int> received(p.size(), 0);
    for (int q : p)
      ++received[q];
    for (int count : received)
      EXPECT_EQ(count, 1);
  }
}

TEST(PartnerRanks, TheLeafSwitchComesFromSlurmsTopologyAddress) {
  EXPECT_EQ(leaf_switch("root.s1.n3", "switch.switch.node"), "s1");
  EXPECT_EQ(leaf_switch("s2.n7", "switch.node"), "s2");
  EXPECT_EQ(leaf_switch("n7", "node"), "") << "no switch above the node";
  EXPECT_EQ(leaf_switch("root.s1.n3", "switch.node"), "") << "address and pattern disagree";
  EXPECT_EQ(leaf_switch(nullptr, "switch.node"), "");
  EXPECT_EQ(leaf_switch("s1.n3", nullptr), "");
}

}  // namespace
