#include "placement/validate.hpp"

#include <cstdint>
#include <string_view>
#include <unordered_set>

#include "tenax/error.hpp"

namespace tenax::placement_detail {

void validate_request(const std::vector<std::string>& nodes, int slots_per_node, const ParallelLayout& layout) {
  if (nodes.empty()) throw UsageError("placement: the node list is empty; pass the job's nodes (SLURM_JOB_NODELIST)");
  std::unordered_set<std::string_view> seen;
  for (const std::string& node : nodes) {
    if (node.empty()) throw UsageError("placement: the node list holds an empty name; remove it");
    if (!seen.insert(node).second)
      throw UsageError("placement: node \"" + node + "\" appears twice in the node list; list each node once");
  }
  if (slots_per_node < 1)
    throw UsageError("placement: slots_per_node = " + std::to_string(slots_per_node) +
                     "; give the number of GPUs (tasks) per node, at least 1");
  const std::string degrees =
      "tp=" + std::to_string(layout.tp) + ",pp=" + std::to_string(layout.pp) + ",dp=" + std::to_string(layout.dp);
  if (layout.tp < 1 || layout.pp < 1 || layout.dp < 1)
    throw UsageError("placement: layout " + degrees + " has a degree below 1; every degree must be >= 1");
  const std::int64_t world = std::int64_t{layout.tp} * layout.pp * layout.dp;
  const std::int64_t slots = static_cast<std::int64_t>(nodes.size()) * slots_per_node;
  if (world > slots)
    throw UsageError("placement: layout " + degrees + " needs " + std::to_string(world) + " ranks but " +
                     std::to_string(nodes.size()) + " nodes x " + std::to_string(slots_per_node) + " slots give " +
                     std::to_string(slots) + "; request more nodes or lower dp");
}

}  // namespace tenax::placement_detail
