#include "placement/traffic_model.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "tenax/error.hpp"

namespace tenax::placement_detail {
namespace {

// Number of edges of each kind whose ends join at each level; turned into bytes once at the end.
struct JoinHistogram {
  explicit JoinHistogram(int top) : tp(top + 1, 0), pp(top + 1, 0), dp(top + 1, 0) {}
  std::vector<long> tp, pp, dp;
};

}  // namespace

void validate_traffic(const StepTraffic& t) {
  const double sizes[] = {t.tp_allreduce_bytes, t.pp_activation_bytes, t.dp_allreduce_bytes};
  const char* names[] = {"tp_allreduce_bytes", "pp_activation_bytes", "dp_allreduce_bytes"};
  for (int i = 0; i < 3; ++i)
    if (!std::isfinite(sizes[i]) || sizes[i] < 0)
      throw UsageError(std::string("StepTraffic.") + names[i] + " = " + std::to_string(sizes[i]) +
                       " is not a byte count; give a finite value >= 0");
}

TrafficCost evaluate_traffic(const JobTopology& job, const std::vector<SlotRef>& slot_of_rank,
                             const ParallelLayout& layout, const StepTraffic& traffic) {
  const int tp = layout.tp, pp = layout.pp, dp = layout.dp;
  JoinHistogram h(job.top_level);
  auto node = [&](int rank) { return slot_of_rank[static_cast<std::size_t>(rank)].node; };
  auto rank = [&](int t, int d, int p) { return t + tp * (d + dp * p); };

  if (tp > 1)
    for (int u = 0; u < pp * dp; ++u)
      for (int t = 0; t < tp; ++t)
        ++h.tp[job.join_level(node(u * tp + t), node(u * tp + (t + 1) % tp))];
  if (dp > 1)
    for (int p = 0; p < pp; ++p)
      for (int t = 0; t < tp; ++t)
        for (int d = 0; d < dp; ++d)
          ++h.dp[job.join_level(node(rank(t, d, p)), node(rank(t, (d + 1) % dp, p)))];
  for (int d = 0; d < dp; ++d)
    for (int t = 0; t < tp; ++t)
      for (int p = 0; p + 1 < pp; ++p)
        ++h.pp[job.join_level(node(rank(t, d, p)), node(rank(t, d, p + 1)))];

  const double tp_edge = ring_edge_bytes(traffic.tp_allreduce_bytes, tp);
  const double dp_edge = ring_edge_bytes(traffic.dp_allreduce_bytes, dp);
  TrafficCost cost;
  cost.crossing.resize(static_cast<std::size_t>(job.top_level));
  // crossing[k] sums the edges joining above k: accumulate from the top down.
  long tp_above = 0, pp_above = 0, dp_above = 0;
  for (int k = job.top_level - 1; k >= 0; --k) {
    tp_above += h.tp[k + 1];
    pp_above += h.pp[k + 1];
    dp_above += h.dp[k + 1];
    cost.crossing[k] = LevelTraffic{tp_above * tp_edge, pp_above * traffic.pp_activation_bytes, dp_above * dp_edge};
  }
  return cost;
}

TrafficCost evaluate_unit_traffic(const JobTopology& job, const std::vector<int>& node_of_unit,
                                  const ParallelLayout& layout, const StepTraffic& traffic) {
  const int pp = layout.pp, dp = layout.dp;
  JoinHistogram h(job.top_level);
  auto node = [&](int d, int p) { return node_of_unit[static_cast<std::size_t>(d + dp * p)]; };
  if (dp > 1)
    for (int p = 0; p < pp; ++p)
      for (int d = 0; d < dp; ++d)
        ++h.dp[job.join_level(node(d, p), node((d + 1) % dp, p))];
  for (int d = 0; d < dp; ++d)
    for (int p = 0; p + 1 < pp; ++p)
      ++h.pp[job.join_level(node(d, p), node(d, p + 1))];

  const double dp_edge = ring_edge_bytes(traffic.dp_allreduce_bytes, dp) * layout.tp;
  const double pp_edge = traffic.pp_activation_bytes * layout.tp;
  TrafficCost cost;
  cost.crossing.resize(static_cast<std::size_t>(job.top_level));
  long pp_above = 0, dp_above = 0;
  for (int k = job.top_level - 1; k >= 0; --k) {
    pp_above += h.pp[k + 1];
    dp_above += h.dp[k + 1];
    cost.crossing[k] = LevelTraffic{0.0, pp_above * pp_edge, dp_above * dp_edge};
  }
  return cost;
}

bool tp_groups_fit_nodes(int num_nodes, int slots_per_node, const ParallelLayout& layout) {
  const long world = static_cast<long>(layout.tp) * layout.pp * layout.dp;
  return layout.tp <= slots_per_node &&
         static_cast<long>(slots_per_node / layout.tp) * layout.tp * static_cast<long>(num_nodes) >= world;
}

namespace {

// Lower bound on the edges of `groups` disjoint groups of `size` ranks that cross the boundaries of domains with
// the given slot capacities: a group inside one domain may cross nothing; no more than sum(floor(C/size)) groups fit
// whole; a split group spans at least `min_domains` domains, and a ring over c >= 2 domains crosses at least c times,
// a chain at least c - 1 times.
long min_crossing_edges(std::vector<long> capacities, long groups, long size, bool ring) {
  if (size < 2 || groups == 0) return 0;
  long whole = 0;
  for (long c : capacities)
    whole += c / size;
  const long split = std::max(0L, groups - whole);
  if (split == 0) return 0;
  std::sort(capacities.begin(), capacities.end(), std::greater<>());
  long min_domains = 0, held = 0;
  for (long c : capacities) {
    if (held >= size) break;
    held += c;
    ++min_domains;
  }
  min_domains = std::max(2L, min_domains);
  return split * (ring ? min_domains : min_domains - 1);
}

}  // namespace

TrafficCost lower_bound_traffic(const JobTopology& job, int slots_per_node, const ParallelLayout& layout,
                                const StepTraffic& traffic) {
  const long tp = layout.tp, pp = layout.pp, dp = layout.dp;
  const double tp_edge = ring_edge_bytes(traffic.tp_allreduce_bytes, layout.tp);
  const double dp_edge = ring_edge_bytes(traffic.dp_allreduce_bytes, layout.dp);
  // With TP groups inside nodes, a node holds slots/tp of them and the members of one DP ring or one pipeline are
  // one rank of distinct TP groups: capacities count TP groups, and the tp rings (chains) of a row cross alike.
  const bool whole_tp = tp_groups_fit_nodes(job.num_nodes, slots_per_node, layout);
  const long per_node = whole_tp ? slots_per_node / tp : slots_per_node;
  TrafficCost bound;
  bound.crossing.resize(static_cast<std::size_t>(job.top_level));
  for (int k = 0; k < job.top_level; ++k) {
    std::vector<long> capacities(static_cast<std::size_t>(job.domain_count[k]), 0);
    for (int n = 0; n < job.num_nodes; ++n)
      capacities[job.domain_of(n, k)] += per_node;
    if (whole_tp) {
      bound.crossing[k].dp = tp * min_crossing_edges(capacities, pp, dp, true) * dp_edge;
      bound.crossing[k].pp = tp * min_crossing_edges(capacities, dp, pp, false) * traffic.pp_activation_bytes;
    } else {
      bound.crossing[k].tp = min_crossing_edges(capacities, pp * dp, tp, true) * tp_edge;
      bound.crossing[k].dp = min_crossing_edges(capacities, tp * pp, dp, true) * dp_edge;
      bound.crossing[k].pp = min_crossing_edges(capacities, tp * dp, pp, false) * traffic.pp_activation_bytes;
    }
  }
  return bound;
}

}  // namespace tenax::placement_detail
