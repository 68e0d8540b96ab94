// The ranks of one job step's tasks: from what slurmstepd knows about the step (its node list, tasks per node and
// task count) to each (node, local task) pair's tenax rank, by the placement policy.
//
// Every node of the step computes the same map on its own (placement is a pure, deterministic function of the step's
// shape, the layout and the topology file), so no communication between nodes is needed.
//
// SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE are read from the job's environment, which the user controls:
// they are parsed as hostile input, bounded by kMaxStepTasks and kMaxTasksPerNode (input_limits.hpp) before anything
// is allocated, and every count is computed in 64 bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_config.hpp"
#include "job_request.hpp"
#include "job_settings.hpp"
#include "tenax/parallel_layout.hpp"
#include "tenax/placement.hpp"
#include "tenax/topology.hpp"

namespace tenax::spank {

struct StepShape {
  std::vector<std::string> nodes;   // the step's nodes, in Slurm's node order (SLURM_STEP_NODELIST expanded)
  std::vector<int> tasks_per_node;  // same length as nodes (SLURM_STEP_TASKS_PER_NODE expanded)
  std::int64_t total_tasks() const;
};

// Expands Slurm's compressed task counts: "4,2,1(x2)" -> {4, 2, 1, 1}. Each count is 1..kMaxTasksPerNode, and the
// list covers at most kMaxStepTasks nodes and tasks (checked before expanding). Throws UsageError naming
// SLURM_STEP_TASKS_PER_NODE, the value and the problem.
std::vector<int> expand_tasks_per_node(std::string_view text);

// Builds a shape from SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE, checking that they agree. The node list is
// measured before it is expanded: more than kMaxStepTasks nodes are refused.
StepShape step_shape(std::string_view nodelist, std::string_view tasks_per_node);

// The complete layout of `world_size` ranks (1..kMaxStepTasks): dp inferred when the request leaves it out, and
// tp*pp*dp checked against the task count in 64 bits. Throws UsageError naming the layout's source (option or
// variable), the task count and the fix.
ParallelLayout resolve_layout(const std::optional<LayoutRequest>& request, std::int64_t world_size,
                              std::string_view source = "--tenax-layout");

// What Slurm itself says about the step and this node (spank_get_item), unnarrowed.
struct SlurmStepItems {
  std::uint64_t total_tasks = 0;  // S_JOB_TOTAL_TASK_COUNT
  std::uint64_t node_index = 0;   // S_JOB_NODEID
  std::uint64_t local_tasks = 0;  // S_JOB_LOCAL_TASK_COUNT
};
// slurmstepd's check that the environment's shape is the step Slurm runs. Throws Error when they disagree.
void check_step_items(const StepShape& shape, const SlurmStepItems& items);

// slurmstepd's check of the step the user asked for, before anything is placed: the task count within bounds, the
// layout against it, and (for topology and block placement) an even split of the tasks over the nodes. Throws
// UsageError naming the problem and the fix.
void check_step_request(const JobSettings& settings, std::uint64_t tasks, std::uint64_t nodes);

// The step's placement under `policy`. Topology and block need the same number of tasks on every node (a GPU slot per
// task); policy none returns no placement (each task keeps Slurm's SLURM_PROCID as its rank).
std::optional<Placement> place_step(const StepShape& shape, const ParallelLayout& layout, PlacementPolicy policy,
                                    const SwitchTree& tree);

// For the log: the policy the step was placed under and, for topology, the arrangement that won, e.g.
// "topology (arrangement block: no other order was cheaper)" or "topology (arrangement median,dp-first)".
std::string placement_log_text(PlacementPolicy policy, const Placement* placement);

}  // namespace tenax::spank
