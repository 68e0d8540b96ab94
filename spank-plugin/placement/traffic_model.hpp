// The cost model behind traffic_cost and place_ranks (see tenax/placement.hpp): rings in group rank order for the TP
// and DP all-reduces, a chain for PP, bytes counted at every level a message climbs above.
#pragma once

#include <vector>

#include "placement/job_topology.hpp"
#include "tenax/placement.hpp"

namespace tenax::placement_detail {

// Bytes one ring edge carries in an all-reduce of `bytes` over `group` ranks (ring algorithm: 2(g-1)/g * S).
inline double ring_edge_bytes(double bytes, int group) {
  return group < 2 ? 0.0 : 2.0 * (group - 1) / group * bytes;
}

TrafficCost evaluate_traffic(const JobTopology& job, const std::vector<SlotRef>& slot_of_rank,
                             const ParallelLayout& layout, const StepTraffic& traffic);

// The same model for a placement whose TP groups each sit inside one node (node_of_unit[u], u = d + dp * p): TP
// traffic is then zero and every DP/PP edge between two units stands for tp identical rank edges. Used to rate
// candidates without expanding them to ranks.
TrafficCost evaluate_unit_traffic(const JobTopology& job, const std::vector<int>& node_of_unit,
                                  const ParallelLayout& layout, const StepTraffic& traffic);

// True when every TP group can sit inside one node: tp <= slots per node and whole groups leave room for all ranks.
bool tp_groups_fit_nodes(int num_nodes, int slots_per_node, const ParallelLayout& layout);

// Lower bound over every placement that keeps TP groups inside nodes when tp_groups_fit_nodes (the rule place_ranks
// follows), over every placement otherwise.
TrafficCost lower_bound_traffic(const JobTopology& job, int slots_per_node, const ParallelLayout& layout,
                                const StepTraffic& traffic);

// Throws UsageError unless the sizes are finite and >= 0.
void validate_traffic(const StepTraffic& traffic);

}  // namespace tenax::placement_detail
