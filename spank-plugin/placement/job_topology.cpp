#include "placement/job_topology.hpp"

#include <algorithm>
#include <unordered_map>

namespace tenax::placement_detail {

JobTopology build_job_topology(const std::vector<std::string>& nodes, const SwitchTree& tree) {
  JobTopology job;
  job.num_nodes = static_cast<int>(nodes.size());
  const std::vector<Switch>& switches = tree.switches();

  std::vector<std::vector<int>> paths(nodes.size());
  int highest = 0;
  int first_top = -1;
  bool one_top = true;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    paths[n] = tree.path_of_node(nodes[n]);
    if (paths[n].empty()) {
      job.nodes_without_topology.push_back(nodes[n]);
      one_top = false;
      continue;
    }
    const int top = paths[n].back();
    highest = std::max(highest, switches[top].level);
    if (first_top < 0) first_top = top;
    if (top != first_top) one_top = false;
  }
  // One real top switch joins everything; otherwise a joint level above the highest switch does (at least level 2, so
  // that nodes without topology sit on leaves of their own).
  job.top_level = one_top ? highest : std::max(highest, 1) + 1;

  const int levels = job.top_level + 1;
  job.domain.assign(nodes.size() * static_cast<std::size_t>(levels), 0);
  job.domain_count.assign(static_cast<std::size_t>(levels), 0);
  // Keys: switch index >= 0, or -(node + 1) for a node alone at that level.
  std::vector<std::unordered_map<long, int>> ids(static_cast<std::size_t>(levels));
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    for (int k = 0; k < levels; ++k) {
      long key = -static_cast<long>(n) - 1;
      if (k == job.top_level) {
        key = 0;
      } else {
        for (int s : paths[n]) {
          if (switches[s].level > k) break;  // levels rise strictly along a path
          key = s;
        }
      }
      auto [it, inserted] = ids[k].emplace(key, job.domain_count[k]);
      if (inserted) ++job.domain_count[k];
      job.domain[n * levels + k] = it->second;
    }
  }
  return job;
}

}  // namespace tenax::placement_detail
