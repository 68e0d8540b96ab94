// The job's nodes seen through the switch tree, normalised for placement and the cost model: every node gets exactly
// one "domain" per level 0..top_level, nested (a level-k domain lies inside one level-(k+1) domain).
//
// Level-k domain of a node = the highest switch on its path whose level is <= k (the node alone when there is none,
// e.g. level 0, or a node hanging directly from a level-2 switch); top_level's single domain holds every node. Two
// nodes share their level-k domain exactly when the lowest switch joining them is at level <= k, so "a message climbs
// above level k" == "its ends lie in different level-k domains". Several top-level switches, or nodes missing from the
// tree, add one joint level above the highest switch (see tenax/topology.hpp).
#pragma once

#include <string>
#include <vector>

#include "tenax/topology.hpp"

namespace tenax::placement_detail {

struct JobTopology {
  int num_nodes = 0;
  int top_level = 1;
  // domain[node * (top_level + 1) + k]: dense id of the node's level-k domain, numbered by first appearance in node
  // order (so ids, like everything here, depend only on the input order).
  std::vector<int> domain;
  std::vector<int> domain_count;  // per level
  std::vector<std::string> nodes_without_topology;

  int domain_of(int node, int level) const { return domain[static_cast<std::size_t>(node) * (top_level + 1) + level]; }
  // Lowest level at which two nodes share a domain: 0 for the same node, top_level at most.
  int join_level(int a, int b) const {
    const int* da = &domain[static_cast<std::size_t>(a) * (top_level + 1)];
    const int* db = &domain[static_cast<std::size_t>(b) * (top_level + 1)];
    int k = 0;
    while (da[k] != db[k])
      ++k;
    return k;
  }
};

JobTopology build_job_topology(const std::vector<std::string>& nodes, const SwitchTree& tree);

}  // namespace tenax::placement_detail
