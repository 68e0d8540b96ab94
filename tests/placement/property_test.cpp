// Properties of place_ranks over many random fragmented clusters and layouts.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "random_cluster.hpp"
#include "tenax/placement.hpp"

namespace tenax {
namespace {

struct Case {
  std::vector<std::string> nodes;
  SwitchTree tree;
  int slots = 1;
  ParallelLayout layout;
  StepTraffic traffic;
};

// Layout degrees drawn so that the world fits the allocation (sometimes exactly, sometimes with spare slots).
Case random_case(std::mt19937& rng) {
  Case c;
  const int leaves = 2 + static_cast<int>(rng() % 6);
  const int leaf_size = 2 + static_cast<int>(rng() % 7);
  const int groups = (rng() % 2) ? 0 : 2 + static_cast<int>(rng() % 2);
  const bool partial_tree = rng() % 5 == 0;
  test::RandomCluster cluster = test::make_random_cluster(rng, leaves, leaf_size, groups, 0.3, rng() % 2, 64);
  c.nodes = cluster.job_nodes;
  if (partial_tree) c.nodes.push_back("stray" + std::to_string(rng() % 100));
  c.tree = SwitchTree::from_topology_conf(cluster.topology_conf);
  const int slot_choices[] = {1, 2, 3, 4, 8};
  c.slots = slot_choices[rng() % 5];
  const long capacity = static_cast<long>(c.nodes.size()) * c.slots;
  const int tp_choices[] = {1, 2, 4, 8, 3};
  do {
    c.layout.tp = tp_choices[rng() % 5];
    c.layout.pp = 1 + static_cast<int>(rng() % 4);
    c.layout.dp = 1 + static_cast<int>(rng() % 12);
  } while (static_cast<long>(c.layout.tp) * c.layout.pp * c.layout.dp > capacity);
  if (rng() % 3 == 0) {  // fill the allocation as far as the degrees allow
    while (static_cast<long>(c.layout.tp) * c.layout.pp * (c.layout.dp + 1) <= capacity)
      ++c.layout.dp;
  }
  std::uniform_real_distribution<double> bytes(0.0, 1e9);
  c.traffic.tp_allreduce_bytes = bytes(rng) * 4;
  c.traffic.pp_activation_bytes = bytes(rng);
  c.traffic.dp_allreduce_bytes = bytes(rng) * 2;
  return c;
}

std::string describe(const Case& c) {
  return std::to_string(c.nodes.size()) + " nodes x " + std::to_string(c.slots) +
         " slots, tp=" + std::to_string(c.layout.tp) + " pp=" + std::to_string(c.layout.pp) +
         " dp=" + std::to_string(c.layout.dp);
}

bool tp_whole_is_possible(const Case& c) {
  return c.layout.tp <= c.slots &&
         static_cast<long>(c.slots / c.layout.tp) * c.layout.tp * static_cast<long>(c.nodes.size()) >=
             static_cast<long>(c.layout.world_size());
}

bool tp_groups_whole(const Placement& p) {
  for (int r = 0; r < p.layout.world_size(); ++r)
    if (p.slot_of_rank[r].node != p.slot_of_rank[r - r % p.layout.tp].node) return false;
  return true;
}

TEST(PlacementProperties, RandomFragmentedClusters) {
  std::mt19937 rng(1122);
  int tp_checked = 0, improved = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Case c = random_case(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + describe(c));
    const Placement p = place_ranks(c.nodes, c.tree, c.slots, c.layout, c.traffic);
    const int world = c.layout.world_size();

    // A permutation: every rank placed on a valid slot, no slot used twice, and rank_at agrees.
    ASSERT_EQ(static_cast<int>(p.slot_of_rank.size()), world);
    std::set<std::pair<int, int>> used;
    for (int r = 0; r < world; ++r) {
      const SlotRef s = p.slot_of_rank[r];
      ASSERT_GE(s.node, 0);
      ASSERT_LT(s.node, static_cast<int>(c.nodes.size()));
      ASSERT_GE(s.slot, 0);
      ASSERT_LT(s.slot, c.slots);
      ASSERT_TRUE(used.insert({s.node, s.slot}).second) << "slot used twice by rank " << r;
      ASSERT_EQ(p.rank_at(s.node, s.slot), r);
    }

    // TP never split across nodes when whole TP groups fit.
    if (tp_whole_is_possible(c)) {
      EXPECT_TRUE(tp_groups_whole(p));
      ++tp_checked;
    }

    // Never worse than SLURM_PROCID order (when that order keeps TP whole too), never better than the bound.
    const Placement naive = block_placement(c.nodes, c.slots, c.layout);
    const TrafficCost cost = traffic_cost(p, c.tree, c.traffic);
    const TrafficCost naive_cost = traffic_cost(naive, c.tree, c.traffic);
    const TrafficCost bound = traffic_lower_bound(c.nodes, c.tree, c.slots, c.layout, c.traffic);
    const bool naive_comparable = !tp_whole_is_possible(c) || tp_groups_whole(naive);
    if (naive_comparable) {
      EXPECT_LE(cost.total(), naive_cost.total() * (1 + 1e-12));
    }
    if (cost.total() < naive_cost.total() * (1 - 1e-9)) ++improved;
    ASSERT_EQ(bound.crossing.size(), cost.crossing.size());
    for (std::size_t k = 0; k < cost.crossing.size(); ++k) {
      EXPECT_LE(bound.crossing[k].tp, cost.crossing[k].tp * (1 + 1e-12) + 1e-6) << "level " << k;
      EXPECT_LE(bound.crossing[k].pp, cost.crossing[k].pp * (1 + 1e-12) + 1e-6) << "level " << k;
      EXPECT_LE(bound.crossing[k].dp, cost.crossing[k].dp * (1 + 1e-12) + 1e-6) << "level " << k;
      if (naive_comparable) {
        EXPECT_LE(bound.crossing[k].total(), naive_cost.crossing[k].total() * (1 + 1e-12) + 1e-6) << "level " << k;
      }
    }

    // Deterministic: the same input (a copy of it) gives the same map.
    const SwitchTree tree_copy = c.tree;
    const std::vector<std::string> nodes_copy = c.nodes;
    const Placement again = place_ranks(nodes_copy, tree_copy, c.slots, c.layout, c.traffic);
    EXPECT_EQ(again.slot_of_rank, p.slot_of_rank);
  }
  // The random cases must exercise what they claim to check.
  EXPECT_GT(tp_checked, 200);
  EXPECT_GT(improved, 100);
}

}  // namespace
}  // namespace tenax
