// The ranks of one job step's tasks: from what slurmstepd knows about the step (its node list, tasks per node and
// task count) to each (node, local task) pair's tenax rank, by the placement policy.
//
// Every node of the step computes the same map on its own (placement is a pure, deterministic function of the step's
// shape, the layout and the topology file), so no communication between nodes is needed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_config.hpp"
#include "job_request.hpp"
#include "tenax/layout.hpp"
#include "tenax/placement.hpp"
#include "tenax/topology.hpp"

namespace tenax::spank {

struct StepShape {
  std::vector<std::string> nodes;   // the step's nodes, in Slurm's node order (SLURM_STEP_NODELIST expanded)
  std::vector<int> tasks_per_node;  // same length as nodes (SLURM_STEP_TASKS_PER_NODE expanded)
  int total_tasks() const;
};

// Expands Slurm's compressed task counts: "4,2,1(x2)" -> {4, 2, 1, 1}. Throws UsageError on malformed text.
std::vector<int> expand_tasks_per_node(std::string_view text);

// Builds a shape from SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE, checking that they agree.
StepShape step_shape(std::string_view nodelist, std::string_view tasks_per_node);

// The complete layout of `world_size` ranks: dp inferred when the request leaves it out, and tp*pp*dp checked against
// the task count. Throws UsageError naming the layout's source (option or variable), the task count and the fix.
ParallelLayout resolve_layout(const std::optional<LayoutRequest>& request, int world_size,
                              std::string_view source = "--tenax-layout");

// The step's placement under `policy`. Topology and block need the same number of tasks on every node (a GPU slot per
// task); policy none returns no placement (each task keeps Slurm's SLURM_PROCID as its rank).
std::optional<Placement> place_step(const StepShape& shape, const ParallelLayout& layout, PlacementPolicy policy,
                                    const SwitchTree& tree);

}  // namespace tenax::spank
