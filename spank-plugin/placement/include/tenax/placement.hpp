// Topology-aware rank placement and the traffic cost model.
//
// Contract (for the runtime, the launcher and the SPANK plugin alike):
//   - Pure functions: no I/O, no environment, no logging, no threads, no global state; thread-safe; the same input
//     always gives the same output, on every node (every task of a job can compute the whole map independently and
//     they all agree). Only the C++ standard library is used; of tenax/layout.hpp only ParallelLayout's data members
//     are read, so nothing from libtenax needs to be linked (the plugin compiles these sources on their own).
//   - Bad input throws tenax::UsageError (a std::runtime_error) naming the input and the fix; nothing else is thrown
//     except std::bad_alloc. Callers across a C boundary catch std::exception.
//   - Rank numbering is ParallelLayout's: rank = tp_index + tp * (dp_index + dp * pp_index).
//   - Output: rank -> (node, local slot), a permutation: every rank placed, every (node, slot) used at most once.
//     node indexes the `nodes` list exactly as given; slot is in [0, slots_per_node) (a GPU, i.e. a local rank).
//   - Objective, in order: (1) every TP group inside one node whenever the allocation allows it (tp <= slots per node
//     and enough whole-group room); (2) among candidate arrangements (blocks of whole pipelines, slabs of stages, tiles
//     sized to the tree's switches, and the naive order), the least traffic across switch levels under the cost model
//     below, weighted by the step's message sizes: this keeps PP neighbours under one leaf switch and DP groups under
//     the fewest switches, trading one against the other by their bytes; (3) never more cost than the naive
//     SLURM_PROCID (block) order when that order also keeps TP groups whole. See docs/placement.md.
//   - Fragmented allocations (nodes spread unevenly over leaf switches) are packed group by group, best fit, into the
//     subtrees where they fit whole; when the allocation has more slots than ranks, the tightest subtrees are filled
//     first and the spare slots are left together.
//
// Cost model: collectives are rings in group rank order; an all-reduce of S bytes over g ranks sends 2(g-1)/g * S
// bytes along each ring edge; PP sends `pp_activation_bytes` between each pair of neighbouring stages. A message
// between two ranks crosses level k when the lowest switch joining their nodes is above level k (k = 0: it leaves the
// node; k = 1: it leaves the leaf switch, ...). The total cost is the sum over levels (bytes x levels climbed).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tenax/hostlist.hpp"
#include "tenax/parallel_layout.hpp"
#include "tenax/topology.hpp"

namespace tenax {

// Bytes each rank moves per training step, by kind. Defaults are representative ratios of a Megatron-style model
// (TP all-reduces heaviest, then DP gradients, then PP activations); pass measured sizes when known.
struct StepTraffic {
  double tp_allreduce_bytes = 8.0 * (1 << 30);   // payload all-reduced in the TP group, summed over the step
  double pp_activation_bytes = 0.5 * (1 << 30);  // to the next stage and back, summed over the step's micro-batches
  double dp_allreduce_bytes = 2.0 * (1 << 30);   // gradient payload all-reduced in the DP group
};

struct SlotRef {
  int node = -1;  // index into the node list
  int slot = -1;  // local slot (GPU) on that node
  friend bool operator==(const SlotRef&, const SlotRef&) = default;
};

struct Placement {
  std::vector<std::string> nodes;  // the job's nodes, as given
  int slots_per_node = 0;
  ParallelLayout layout;
  std::vector<SlotRef> slot_of_rank;  // size layout.world_size()
  std::vector<int> rank_of_slot;      // size nodes.size() * slots_per_node, [node * slots_per_node + slot], -1 = unused
  // Nodes of `nodes` that the switch tree does not contain (each treated as alone on its own leaf switch).
  std::vector<std::string> nodes_without_topology;
  // Which arrangement won, for logs: e.g. "topology:replica-blocks(b=4)" or "block".
  std::string strategy;

  // The rank on (node, slot), or -1 when that slot is left unused. Throws UsageError when out of range.
  int rank_at(int node, int slot) const;
  // Index of `name` in nodes, or -1.
  int node_index(std::string_view name) const;
};

// Topology-aware placement. `nodes` must be distinct and non-empty, slots_per_node >= 1, every degree of `layout`
// >= 1, and layout.world_size() <= nodes.size() * slots_per_node (unused slots are allowed: spare capacity).
Placement place_ranks(const std::vector<std::string>& nodes, const SwitchTree& tree, int slots_per_node,
                      const ParallelLayout& layout, const StepTraffic& traffic = StepTraffic{});

// The naive SLURM_PROCID order (Slurm's block distribution): rank r -> node r / slots_per_node, slot r %
// slots_per_node.
Placement block_placement(const std::vector<std::string>& nodes, int slots_per_node, const ParallelLayout& layout);

struct LevelTraffic {
  double tp = 0;  // bytes per step crossing this level, by kind
  double pp = 0;
  double dp = 0;
  double total() const { return tp + pp + dp; }
};

struct TrafficCost {
  // crossing[k]: bytes per step (all ranks together) of messages that climb above level k. crossing[0] is inter-node
  // traffic, crossing[1] the traffic leaving leaf switches, ... ; the top level (one switch, or the joint above several
  // top-level switches) is not listed because nothing crosses it.
  std::vector<LevelTraffic> crossing;

  double inter_node_bytes() const { return crossing.empty() ? 0 : crossing[0].total(); }
  // Traffic that leaves a leaf switch (0 when the tree has a single leaf).
  double cross_switch_bytes() const { return crossing.size() < 2 ? 0 : crossing[1].total(); }
  // Sum over levels: the quantity placement minimises.
  double total() const;
};

// Traffic of a placement (from place_ranks or block_placement) on `tree`.
TrafficCost traffic_cost(const Placement& placement, const SwitchTree& tree, const StepTraffic& traffic);

// A lower bound on traffic_cost, level by level, over every placement of `layout` on these nodes that keeps TP groups
// inside nodes when they fit (the rule place_ranks follows; over every placement otherwise): groups that cannot fit
// whole inside one domain of a level (by capacity) cross it at least twice (rings) or once (pipelines), and at least as
// often as the fewest domains that can hold them. Valid, not tight: it ignores that groups compete for the same room.
TrafficCost traffic_lower_bound(const std::vector<std::string>& nodes, const SwitchTree& tree, int slots_per_node,
                                const ParallelLayout& layout, const StepTraffic& traffic);

}  // namespace tenax
