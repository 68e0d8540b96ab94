// Input checks shared by place_ranks, block_placement and traffic_lower_bound.
#pragma once

#include <string>
#include <vector>

#include "tenax/parallel_layout.hpp"

namespace tenax::placement_detail {

// Throws UsageError unless the nodes are non-empty and distinct, slots_per_node >= 1, every degree >= 1 and the
// layout's ranks fit in nodes x slots.
void validate_request(const std::vector<std::string>& nodes, int slots_per_node, const ParallelLayout& layout);

}  // namespace tenax::placement_detail
