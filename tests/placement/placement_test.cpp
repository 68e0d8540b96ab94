// Hand-checked placements and costs on small clusters.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/placement.hpp"

namespace tenax {
namespace {

using Names = std::vector<std::string>;

ParallelLayout layout(int tp, int pp, int dp) {
  ParallelLayout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  return l;
}

StepTraffic traffic(double tp, double pp, double dp) {
  StepTraffic t;
  t.tp_allreduce_bytes = tp;
  t.pp_activation_bytes = pp;
  t.dp_allreduce_bytes = dp;
  return t;
}

std::string node_of(const Placement& p, int rank) {
  return p.nodes[p.slot_of_rank[rank].node];
}

TEST(Placement, BlockOrderIsSlurmProcidOrder) {
  const Placement p = block_placement({"a", "b", "c"}, 2, layout(2, 1, 2));
  ASSERT_EQ(p.slot_of_rank.size(), 4u);
  EXPECT_EQ(p.slot_of_rank[0], (SlotRef{0, 0}));
  EXPECT_EQ(p.slot_of_rank[1], (SlotRef{0, 1}));
  EXPECT_EQ(p.slot_of_rank[2], (SlotRef{1, 0}));
  EXPECT_EQ(p.slot_of_rank[3], (SlotRef{1, 1}));
  EXPECT_EQ(p.rank_at(1, 1), 3);
  EXPECT_EQ(p.rank_at(2, 0), -1);  // spare node
  EXPECT_EQ(p.node_index("c"), 2);
  EXPECT_EQ(p.node_index("z"), -1);
  EXPECT_THROW(p.rank_at(3, 0), UsageError);
  EXPECT_THROW(p.rank_at(0, 2), UsageError);
}

// Two leaves of three nodes; the job got a1 b1 a2 b2 in that (interleaved) order, one GPU each, one DP ring of 4.
// SLURM_PROCID order crosses between the leaves on all 4 ring edges; the best order crosses twice, which is also the
// lower bound (a ring touching two leaves crosses at least twice).
TEST(Placement, InterleavedNodesAreRegroupedByLeafSwitch) {
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=sa Nodes=a[1-3]\nSwitchName=sb Nodes=b[1-3]\nSwitchName=top Switches=sa,sb\n");
  const Names nodes = {"a1", "b1", "a2", "b2"};
  const StepTraffic t = traffic(0, 0, 1000);
  const double edge = 2.0 * 3 / 4 * 1000;  // ring all-reduce of 1000 bytes over 4 ranks, per edge

  const TrafficCost naive = traffic_cost(block_placement(nodes, 1, layout(1, 1, 4)), tree, t);
  ASSERT_EQ(naive.crossing.size(), 2u);
  EXPECT_DOUBLE_EQ(naive.crossing[0].dp, 4 * edge);
  EXPECT_DOUBLE_EQ(naive.crossing[1].dp, 4 * edge);

  const Placement p = place_ranks(nodes, tree, 1, layout(1, 1, 4), t);
  const TrafficCost cost = traffic_cost(p, tree, t);
  EXPECT_DOUBLE_EQ(cost.crossing[0].dp, 4 * edge);
  EXPECT_DOUBLE_EQ(cost.crossing[1].dp, 2 * edge);
  EXPECT_DOUBLE_EQ(cost.cross_switch_bytes(), 2 * edge);
  EXPECT_DOUBLE_EQ(cost.total(), 6 * edge);

  const TrafficCost bound = traffic_lower_bound(nodes, tree, 1, layout(1, 1, 4), t);
  EXPECT_DOUBLE_EQ(bound.crossing[0].dp, 4 * edge);
  EXPECT_DOUBLE_EQ(bound.crossing[1].dp, 2 * edge);
  EXPECT_TRUE(p.nodes_without_topology.empty());
}

// Two leaves of four single-GPU nodes, pp=2, dp=4. Heavy activations: whole pipelines stay under one leaf and only
// the DP rings cross. Heavy gradients: each stage's DP ring stays under one leaf and only the PP edges cross.
TEST(Placement, TradesPipelineAgainstDataParallelTrafficByBytes) {
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=n[5-8]\nSwitchName=t Switches=s[0-1]");
  const Names nodes = {"n1", "n5", "n2", "n6", "n3", "n7", "n4", "n8"};

  const StepTraffic heavy_pp = traffic(0, 100, 1);
  const TrafficCost pp_cost = traffic_cost(place_ranks(nodes, tree, 1, layout(1, 2, 4), heavy_pp), tree, heavy_pp);
  EXPECT_EQ(pp_cost.crossing[1].pp, 0);
  EXPECT_DOUBLE_EQ(pp_cost.crossing[1].dp, 2 * 2 * 1.5);  // two rings, each cut into two pieces

  const StepTraffic heavy_dp = traffic(0, 1, 100);
  const TrafficCost dp_cost = traffic_cost(place_ranks(nodes, tree, 1, layout(1, 2, 4), heavy_dp), tree, heavy_dp);
  EXPECT_EQ(dp_cost.crossing[1].dp, 0);
  EXPECT_DOUBLE_EQ(dp_cost.crossing[1].pp, 4 * 1);  // each of the 4 pipelines crosses once
}

TEST(Placement, TensorGroupsStayInsideNodes) {
  // 2 nodes x 4 GPUs, tp=4: each TP group fills one node.
  const Placement p = place_ranks({"x", "y"}, SwitchTree{}, 4, layout(4, 1, 2));
  for (int r = 0; r < 8; ++r)
    EXPECT_EQ(node_of(p, r), node_of(p, r - r % 4)) << r;
  EXPECT_NE(node_of(p, 0), node_of(p, 4));
  EXPECT_EQ(p.nodes_without_topology, (Names{"x", "y"}));

  // 3 slots per node, tp=2: one whole TP group per node fits, so none is split although slots stay free.
  const Placement q = place_ranks({"x", "y"}, SwitchTree{}, 3, layout(2, 1, 2));
  EXPECT_EQ(node_of(q, 0), node_of(q, 1));
  EXPECT_EQ(node_of(q, 2), node_of(q, 3));
}

TEST(Placement, TensorGroupsWiderThanANodeStayUnderOneLeaf) {
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[3-4]\nSwitchName=t Switches=s[0-1]\n");
  const Names nodes = {"n1", "n3", "n2", "n4"};
  const StepTraffic t = traffic(100, 0, 1);
  const Placement p = place_ranks(nodes, tree, 2, layout(4, 1, 2), t);
  const TrafficCost cost = traffic_cost(p, tree, t);
  EXPECT_EQ(cost.crossing[1].tp, 0);
  EXPECT_GT(cost.crossing[0].tp, 0);  // it must leave the node
}

TEST(Placement, SpareCapacityIsTakenWhereTheJobFitsWhole) {
  // Only leaf s1 holds all 8 ranks: every rank goes there and nothing crosses a leaf switch.
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=s0 Nodes=a[1-3]\nSwitchName=s1 Nodes=b[1-8]\nSwitchName=s2 Nodes=c[1-3]\nSwitchName=t "
      "Switches=s[0-2]\n");
  Names nodes = {"a1", "a2", "a3", "c1", "c2", "c3"};
  for (int i = 1; i <= 8; ++i)
    nodes.push_back("b" + std::to_string(i));
  const Placement p = place_ranks(nodes, tree, 1, layout(1, 1, 8));
  std::set<std::string> used;
  for (int r = 0; r < 8; ++r)
    used.insert(node_of(p, r));
  EXPECT_EQ(used.size(), 8u);
  for (const std::string& n : used)
    EXPECT_EQ(n[0], 'b') << n;
  EXPECT_EQ(traffic_cost(p, tree, StepTraffic{}).cross_switch_bytes(), 0);
}

TEST(Placement, NodesMissingFromTheTreeAreReportedAndStillPlaced) {
  const SwitchTree tree = SwitchTree::from_topology_conf("SwitchName=s0 Nodes=n[1-2]\n");
  const Placement p = place_ranks({"n1", "lost", "n2"}, tree, 2, layout(2, 1, 3));
  EXPECT_EQ(p.nodes_without_topology, (Names{"lost"}));
  std::set<std::pair<int, int>> slots;
  for (const SlotRef& s : p.slot_of_rank)
    slots.insert({s.node, s.slot});
  EXPECT_EQ(slots.size(), 6u);
  // A joint level 2 now sits above s0 and "lost"; crossings are reported for levels 0 (node) and 1 (leaf).
  EXPECT_EQ(traffic_cost(p, tree, StepTraffic{}).crossing.size(), 2u);
}

TEST(Placement, CostOfAHandCheckedBlockOrder) {
  // 2 nodes x 2 GPUs, tp=2, dp=2, no topology: TP stays in each node; each of the 2 DP rings (2 ranks, S bytes)
  // sends S each way across the nodes, which are also on different (own) leaves.
  const StepTraffic t = traffic(10, 0, 1000);
  const TrafficCost c = traffic_cost(block_placement({"x", "y"}, 2, layout(2, 1, 2)), SwitchTree{}, t);
  ASSERT_EQ(c.crossing.size(), 2u);
  EXPECT_EQ(c.crossing[0].tp, 0);
  EXPECT_DOUBLE_EQ(c.crossing[0].dp, 4 * 1000);
  EXPECT_DOUBLE_EQ(c.crossing[1].dp, 4 * 1000);
  EXPECT_DOUBLE_EQ(c.inter_node_bytes(), 4000);
  EXPECT_DOUBLE_EQ(c.total(), 8000);
}

TEST(Placement, PipelineCostCountsNeighbourPairs) {
  // pp=4 on 4 nodes (one GPU each), block order: 3 neighbour pairs, all inter-node.
  const StepTraffic t = traffic(0, 7, 0);
  const TrafficCost c = traffic_cost(block_placement({"a", "b", "c", "d"}, 1, layout(1, 4, 1)), SwitchTree{}, t);
  EXPECT_DOUBLE_EQ(c.crossing[0].pp, 21);
}

TEST(Placement, BadInputIsRefusedWithTheFix) {
  const SwitchTree none;
  auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message([&] { place_ranks({}, none, 8, layout(1, 1, 1)); }).find("node list is empty"), std::string::npos);
  EXPECT_NE(message([&] {
              place_ranks({"a", "a"}, none, 8, layout(1, 1, 1));
            }).find("appears twice"),
            std::string::npos);
  EXPECT_NE(message([&] { place_ranks({"a"}, none, 0, layout(1, 1, 1)); }).find("slots_per_node = 0"),
            std::string::npos);
  EXPECT_NE(message([&] { place_ranks({"a"}, none, 8, layout(0, 1, 1)); }).find("degree below 1"), std::string::npos);
  EXPECT_NE(message([&] {
              place_ranks({"a", "b"}, none, 4, layout(2, 1, 8));
            }).find("needs 16 ranks"),
            std::string::npos);
  EXPECT_NE(
      message([&] { place_ranks({"a"}, none, 1, layout(1, 1, 1), traffic(-1, 0, 0)); }).find("tp_allreduce_bytes"),
      std::string::npos);
  Placement broken = block_placement({"a", "b"}, 1, layout(1, 1, 2));
  broken.slot_of_rank[1] = broken.slot_of_rank[0];
  EXPECT_NE(message([&] { traffic_cost(broken, none, StepTraffic{}); }).find("permutation"), std::string::npos);
  EXPECT_THROW(traffic_lower_bound({"a"}, none, 1, layout(1, 1, 2), StepTraffic{}), UsageError);
}

TEST(Placement, SameInputSameOutput) {
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=s0 Nodes=n[1-5]\nSwitchName=s1 Nodes=n[6-8]\nSwitchName=s2 Nodes=n[9-16]\nSwitchName=t "
      "Switches=s[0-2]\n");
  const Names nodes = {"n2", "n9", "n3", "n7", "n10", "n11", "n1", "n6", "n12", "n13"};
  const Placement a = place_ranks(nodes, tree, 4, layout(2, 2, 9));
  const Placement b = place_ranks(nodes, SwitchTree(tree), 4, layout(2, 2, 9));
  EXPECT_EQ(a.slot_of_rank, b.slot_of_rank);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.rank_of_slot, b.rank_of_slot);
}

}  // namespace
}  // namespace tenax
