// place_ranks: builds candidate arrangements of the layout's groups (arrangements.hpp), packs each into the switch
// tree (rank_packing.hpp), and keeps the one the cost model rates cheapest. The naive block order is a candidate too,
// so the result is never rated worse than it; ties keep the earlier candidate, so the result is deterministic.
#include "tenax/placement.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "placement/arrangements.hpp"
#include "placement/job_topology.hpp"
#include "placement/rank_packing.hpp"
#include "placement/traffic_model.hpp"
#include "placement/validate.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

using placement_detail::Arrangement;
using placement_detail::JobTopology;
using placement_detail::replica_blocks;
using placement_detail::stage_slabs;

Placement make_placement(const std::vector<std::string>& nodes, int slots_per_node, const ParallelLayout& layout,
                         std::vector<SlotRef> slot_of_rank, std::string strategy) {
  Placement p;
  p.nodes = nodes;
  p.slots_per_node = slots_per_node;
  p.layout = layout;
  p.rank_of_slot.assign(nodes.size() * static_cast<std::size_t>(slots_per_node), -1);
  for (std::size_t r = 0; r < slot_of_rank.size(); ++r)
    p.rank_of_slot[static_cast<std::size_t>(slot_of_rank[r].node) * slots_per_node + slot_of_rank[r].slot] =
        static_cast<int>(r);
  p.slot_of_rank = std::move(slot_of_rank);
  p.strategy = std::move(strategy);
  return p;
}

std::vector<SlotRef> block_slots(int world, int slots_per_node) {
  std::vector<SlotRef> slots(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    slots[r] = SlotRef{r / slots_per_node, r % slots_per_node};
  return slots;
}

bool tp_groups_whole(const std::vector<SlotRef>& slot_of_rank, int tp) {
  for (std::size_t r = 0; r < slot_of_rank.size(); ++r)
    if (slot_of_rank[r].node != slot_of_rank[r - r % tp].node) return false;
  return true;
}

// Grains strictly decreasing and ending in 1, as pack_items wants them.
std::vector<long> tidy_grains(const std::vector<long>& grains) {
  std::vector<long> out;
  for (long g : grains)
    if (out.empty() || g < out.back()) out.push_back(g);
  if (out.back() > 1) out.push_back(1);
  return out;
}

// Packs an arrangement. When TP groups fit whole, items are TP groups (tp slots each); otherwise items are single
// ranks, a TP group's ranks adjacent, with the TP group as the finest grain above one rank.
std::vector<SlotRef> realize(const JobTopology& job, const placement_detail::PackingTree& tree,
                             const ParallelLayout& layout, bool tp_fits, const Arrangement& arr) {
  const int tp = layout.tp;
  const int units = static_cast<int>(arr.unit_at_position.size());
  std::vector<SlotRef> slot_of_rank(static_cast<std::size_t>(units) * tp);
  if (tp_fits) {
    const std::vector<SlotRef> first = placement_detail::pack_items(job, tree, units, tp, tidy_grains(arr.grains));
    for (int i = 0; i < units; ++i)
      for (int t = 0; t < tp; ++t)
        slot_of_rank[static_cast<std::size_t>(t) + static_cast<std::size_t>(tp) * arr.unit_at_position[i]] =
            SlotRef{first[i].node, first[i].slot + t};
    return slot_of_rank;
  }
  std::vector<long> grains;
  for (long g : arr.grains)
    grains.push_back(g * tp);
  grains.push_back(tp);
  const std::vector<SlotRef> first = placement_detail::pack_items(job, tree, units * tp, 1, tidy_grains(grains));
  for (int i = 0; i < units; ++i)
    for (int t = 0; t < tp; ++t)
      slot_of_rank[static_cast<std::size_t>(t) + static_cast<std::size_t>(tp) * arr.unit_at_position[i]] =
          first[static_cast<std::size_t>(i) * tp + t];
  return slot_of_rank;
}

double rate(const JobTopology& job, const std::vector<SlotRef>& slot_of_rank, const ParallelLayout& layout,
            bool tp_fits, const StepTraffic& traffic) {
  if (!tp_fits) return placement_detail::evaluate_traffic(job, slot_of_rank, layout, traffic).total();
  std::vector<int> node_of_unit(slot_of_rank.size() / static_cast<std::size_t>(layout.tp));
  for (std::size_t u = 0; u < node_of_unit.size(); ++u)
    node_of_unit[u] = slot_of_rank[u * layout.tp].node;
  return placement_detail::evaluate_unit_traffic(job, node_of_unit, layout, traffic).total();
}

}  // namespace

Placement place_ranks(const std::vector<std::string>& nodes, const SwitchTree& tree, int slots_per_node,
                      const ParallelLayout& layout, const StepTraffic& traffic) {
  placement_detail::validate_request(nodes, slots_per_node, layout);
  placement_detail::validate_traffic(traffic);
  const int world = layout.tp * layout.pp * layout.dp;
  const JobTopology job = placement_detail::build_job_topology(nodes, tree);

  // Nodes offer whole TP groups only, when that leaves room for everyone: then no TP group crosses a node boundary.
  const int tp = layout.tp;
  const bool tp_fits = placement_detail::tp_groups_fit_nodes(job.num_nodes, slots_per_node, layout);
  const std::vector<int> node_capacity(nodes.size(), tp_fits ? slots_per_node / tp * tp : slots_per_node);
  const placement_detail::PackingTree packing = placement_detail::build_packing_tree(job, node_capacity);

  // The naive order competes too (when it obeys the TP rule), so the result is never rated worse than it.
  std::vector<SlotRef> best = block_slots(world, slots_per_node);
  std::string best_name = "block";
  double best_cost = -1;
  if (!tp_fits || tp_groups_whole(best, tp)) best_cost = rate(job, best, layout, tp_fits, traffic);
  auto consider = [&](const Arrangement& arr) {
    std::vector<SlotRef> slots = realize(job, packing, layout, tp_fits, arr);
    const double cost = rate(job, slots, layout, tp_fits, traffic);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = std::move(slots);
      best_name = arr.name;
    }
    return cost;
  };

  // A coordinate search: every block width b and every slab height a, then stage grains for the best block width.
  std::vector<int> stage_counts;
  for (int a : placement_detail::divisors(layout.pp))
    if (a > 1 && a < layout.pp) stage_counts.push_back(a);
  int best_b = layout.dp;
  double best_block_cost = -1;
  for (int b : placement_detail::divisors(layout.dp)) {
    const double cost = consider(replica_blocks(layout, b, 0));
    if (best_block_cost < 0 || cost < best_block_cost) {
      best_block_cost = cost;
      best_b = b;
    }
  }
  for (int a : stage_counts)
    consider(stage_slabs(layout, a));
  for (int a : stage_counts)
    consider(replica_blocks(layout, best_b, a));

  // Nested tiles sized for the typical and for the largest domain of each level below the top.
  for (bool largest : {false, true}) {
    std::vector<long> units_per_domain;
    for (int k = 0; k < job.top_level; ++k) {
      std::vector<long> rooms;
      for (long slots : packing.capacity[k])
        if (slots > 0) rooms.push_back(slots / tp);
      std::sort(rooms.begin(), rooms.end());
      units_per_domain.push_back(rooms.empty() ? 1 : largest ? rooms.back() : rooms[rooms.size() / 2]);
    }
    for (bool d_fastest : {true, false})
      consider(placement_detail::nested_tiles(
          layout, units_per_domain, traffic, d_fastest,
          std::string(largest ? "largest" : "median") + (d_fastest ? ",dp-first" : ",pp-first")));
  }

  Placement result = make_placement(nodes, slots_per_node, layout, std::move(best), std::move(best_name));
  result.nodes_without_topology = job.nodes_without_topology;
  return result;
}

Placement block_placement(const std::vector<std::string>& nodes, int slots_per_node, const ParallelLayout& layout) {
  placement_detail::validate_request(nodes, slots_per_node, layout);
  const int world = layout.tp * layout.pp * layout.dp;
  return make_placement(nodes, slots_per_node, layout, block_slots(world, slots_per_node), "block");
}

int Placement::rank_at(int node, int slot) const {
  if (node < 0 || node >= static_cast<int>(nodes.size()) || slot < 0 || slot >= slots_per_node)
    throw UsageError("placement: (node " + std::to_string(node) + ", slot " + std::to_string(slot) + ") is outside " +
                     std::to_string(nodes.size()) + " nodes x " + std::to_string(slots_per_node) +
                     " slots; check SLURM_LOCALID against the GPUs per node");
  return rank_of_slot[static_cast<std::size_t>(node) * slots_per_node + slot];
}

int Placement::node_index(std::string_view name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == name) return static_cast<int>(i);
  return -1;
}

}  // namespace tenax
