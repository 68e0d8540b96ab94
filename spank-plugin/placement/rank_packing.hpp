// Packs a candidate sequence of items (TP groups, or single ranks when TP groups cannot stay whole) into the job's
// switch tree: the core of place_ranks.
//
// Items arrive in a candidate order with a chain of grains, coarse to fine, each dividing the one before: a "group"
// at grain g is the items whose positions share position / g (whole pipelines, a DP row, ...). Walking the tree from
// the top, each switch hands its items to its children:
//   1. for each grain, coarse to fine: every group not yet placed goes whole to the child with the least room that
//      still holds it (best fit, largest groups first): a group that fits somewhere never straddles a boundary, and
//      consecutive groups fill one child before the next;
//   2. what is left (groups too big for any child) is streamed in position order into the child with the most room,
//      then the next, so that a split group is cut into as few contiguous pieces as possible.
// At a node, items take the free slots in position order, `weight` slots each. Every node's room is a multiple of the
// weight, so an item is never cut by a node boundary.
#pragma once

#include <vector>

#include "placement/job_topology.hpp"
#include "tenax/placement.hpp"

namespace tenax::placement_detail {

struct PackingTree {
  // children[k][x]: level-(k-1) domains inside level-k domain x (k >= 1), in id order.
  std::vector<std::vector<std::vector<int>>> children;
  // capacity[k][x]: slots offered by level-k domain x.
  std::vector<std::vector<long>> capacity;
};

// node_capacity: slots each node offers (<= slots_per_node).
PackingTree build_packing_tree(const JobTopology& job, const std::vector<int>& node_capacity);

// Returns, for each position, the node and first slot of its item. Requires the tree's capacity to hold count items
// of `weight` slots, every node capacity a multiple of weight, and grains (in items) ending in 1.
std::vector<SlotRef> pack_items(const JobTopology& job, const PackingTree& tree, int count, int weight,
                                const std::vector<long>& grains);

}  // namespace tenax::placement_detail
