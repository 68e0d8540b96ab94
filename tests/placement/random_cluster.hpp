// Random fragmented clusters for the property tests and the benchmark: a two- or three-level switch tree with leaves
// of uneven size, and an allocation that takes a random share of each leaf, listed in a shuffled or sorted order.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace tenax::test {

struct RandomCluster {
  std::string topology_conf;
  std::vector<std::string> job_nodes;
};

// leaves: number of leaf switches; leaf_size: nodes per leaf (all of the cluster); groups: leaves per level-2 switch
// (0: two levels only); fill: share of each leaf's nodes the job gets, drawn per leaf in [min_fill, 1].
inline RandomCluster make_random_cluster(std::mt19937& rng, int leaves, int leaf_size, int groups, double min_fill,
                                         bool shuffle_order, int max_nodes) {
  RandomCluster c;
  std::uniform_real_distribution<double> fill(min_fill, 1.0);
  for (int l = 0; l < leaves; ++l) {
    c.topology_conf += "SwitchName=leaf" + std::to_string(l) + " Nodes=n" + std::to_string(l) + "x[0-" +
                       std::to_string(leaf_size - 1) + "] LinkSpeed=100\n";
    std::vector<int> members(leaf_size);
    for (int i = 0; i < leaf_size; ++i)
      members[i] = i;
    std::shuffle(members.begin(), members.end(), rng);
    const int take = std::max(1, static_cast<int>(fill(rng) * leaf_size));
    members.resize(take);
    std::sort(members.begin(), members.end());
    for (int m : members)
      c.job_nodes.push_back("n" + std::to_string(l) + "x" + std::to_string(m));
  }
  if (groups > 0) {
    std::vector<std::string> tops;
    for (int g = 0; g * groups < leaves; ++g) {
      const int last = std::min(leaves, (g + 1) * groups) - 1;
      c.topology_conf += "SwitchName=agg" + std::to_string(g) + " Switches=leaf[" + std::to_string(g * groups) + "-" +
                         std::to_string(last) + "]\n";
    }
    c.topology_conf += "SwitchName=core Switches=agg[0-" + std::to_string((leaves - 1) / groups) + "]\n";
  } else {
    c.topology_conf += "SwitchName=core Switches=leaf[0-" + std::to_string(leaves - 1) + "]\n";
  }
  if (shuffle_order) std::shuffle(c.job_nodes.begin(), c.job_nodes.end(), rng);
  if (static_cast<int>(c.job_nodes.size()) > max_nodes) c.job_nodes.resize(static_cast<std::size_t>(max_nodes));
  return c;
}

}  // namespace tenax::test
