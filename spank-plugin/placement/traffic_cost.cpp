// Public entry points of the cost model (the model itself is in traffic_model.cpp).
#include <algorithm>
#include <string>

#include "placement/job_topology.hpp"
#include "placement/traffic_model.hpp"
#include "placement/validate.hpp"
#include "tenax/error.hpp"
#include "tenax/placement.hpp"

namespace tenax {

double TrafficCost::total() const {
  double sum = 0;
  for (const LevelTraffic& level : crossing)
    sum += level.total();
  return sum;
}

TrafficCost traffic_cost(const Placement& placement, const SwitchTree& tree, const StepTraffic& traffic) {
  placement_detail::validate_traffic(traffic);
  const ParallelLayout& layout = placement.layout;
  const long world = static_cast<long>(layout.tp) * layout.pp * layout.dp;
  if (layout.tp < 1 || layout.pp < 1 || layout.dp < 1 || static_cast<long>(placement.slot_of_rank.size()) != world)
    throw UsageError("traffic_cost: the placement holds " + std::to_string(placement.slot_of_rank.size()) +
                     " ranks for layout tp=" + std::to_string(layout.tp) + ",pp=" + std::to_string(layout.pp) +
                     ",dp=" + std::to_string(layout.dp) + "; pass a Placement made by place_ranks or block_placement");
  std::vector<char> used(placement.nodes.size() * static_cast<std::size_t>(std::max(placement.slots_per_node, 0)), 0);
  for (std::size_t r = 0; r < placement.slot_of_rank.size(); ++r) {
    const SlotRef s = placement.slot_of_rank[r];
    if (s.node < 0 || s.node >= static_cast<int>(placement.nodes.size()) || s.slot < 0 ||
        s.slot >= placement.slots_per_node)
      throw UsageError("traffic_cost: rank " + std::to_string(r) + " sits on (node " + std::to_string(s.node) +
                       ", slot " + std::to_string(s.slot) + "), outside the placement's nodes and slots");
    char& u = used[static_cast<std::size_t>(s.node) * placement.slots_per_node + s.slot];
    if (u)
      throw UsageError("traffic_cost: two ranks share (node " + std::to_string(s.node) + ", slot " +
                       std::to_string(s.slot) + "); a placement must be a permutation");
    u = 1;
  }
  const placement_detail::JobTopology job = placement_detail::build_job_topology(placement.nodes, tree);
  return placement_detail::evaluate_traffic(job, placement.slot_of_rank, layout, traffic);
}

TrafficCost traffic_lower_bound(const std::vector<std::string>& nodes, const SwitchTree& tree, int slots_per_node,
                                const ParallelLayout& layout, const StepTraffic& traffic) {
  placement_detail::validate_traffic(traffic);
  // Same preconditions as placement itself: the bound is over the placements place_ranks could return.
  placement_detail::validate_request(nodes, slots_per_node, layout);
  const placement_detail::JobTopology job = placement_detail::build_job_topology(nodes, tree);
  return placement_detail::lower_bound_traffic(job, slots_per_node, layout, traffic);
}

}  // namespace tenax
