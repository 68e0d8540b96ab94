// Placement linked on its own (the tenax_placement static library, no libtenax, no MPI), as the SPANK plugin uses it:
// from SLURM_JOB_NODELIST-style text and topology.conf text to each task's rank.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tenax/error.hpp"
#include "tenax/placement.hpp"

namespace tenax {
namespace {

TEST(PlacementStandalone, FromNodelistAndTopologyToEachTasksRank) {
  const std::vector<std::string> nodes = expand_hostlist("gpu[01-02,05],gpu[03-04]");
  const SwitchTree tree = SwitchTree::from_topology_conf(
      "SwitchName=s1 Nodes=gpu[01-03]\nSwitchName=s2 Nodes=gpu[04-06]\nSwitchName=top Switches=s[1-2]\n");
  ParallelLayout layout;
  layout.tp = 2;
  layout.dp = 5;
  const Placement p = place_ranks(nodes, tree, 2, layout);
  std::set<int> ranks;
  for (const std::string& node : nodes)
    for (int local = 0; local < 2; ++local)
      ranks.insert(p.rank_at(p.node_index(node), local));
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(compress_hostlist(p.nodes), "gpu[01-02,05,03-04]");
  // Errors stay catchable as std::exception across the plugin's C boundary.
  EXPECT_THROW(expand_hostlist("gpu[01"), std::exception);
}

}  // namespace
}  // namespace tenax
