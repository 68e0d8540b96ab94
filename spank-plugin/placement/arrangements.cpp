#include "placement/arrangements.hpp"

#include <utility>

#include "placement/traffic_model.hpp"

namespace tenax::placement_detail {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) out.push_back(i);
  return out;
}

Arrangement replica_blocks(const ParallelLayout& layout, int b, int a) {
  const int pp = layout.pp, dp = layout.dp;
  Arrangement arr;
  arr.name = "topology:replica-blocks(b=" + std::to_string(b) + (a > 0 ? ",a=" + std::to_string(a) : "") + ")";
  arr.unit_at_position.resize(static_cast<std::size_t>(pp) * dp);
  for (int p = 0; p < pp; ++p)
    for (int d = 0; d < dp; ++d)
      arr.unit_at_position[(d % b) + b * (p + pp * (d / b))] = d + dp * p;
  arr.grains = {static_cast<long>(pp) * dp, static_cast<long>(b) * pp};
  if (a > 0) arr.grains.push_back(static_cast<long>(a) * b);
  arr.grains.push_back(b);
  return arr;
}

Arrangement stage_slabs(const ParallelLayout& layout, int a) {
  const int pp = layout.pp, dp = layout.dp;
  Arrangement arr;
  arr.name = "topology:stage-slabs(a=" + std::to_string(a) + ")";
  arr.unit_at_position.resize(static_cast<std::size_t>(pp) * dp);
  for (int p = 0; p < pp; ++p)
    for (int d = 0; d < dp; ++d)
      arr.unit_at_position[(p % a) + a * (d + dp * (p / a))] = d + dp * p;
  arr.grains = {static_cast<long>(pp) * dp, static_cast<long>(a) * dp, a};
  return arr;
}

Arrangement nested_tiles(const ParallelLayout& layout, const std::vector<long>& units_per_domain,
                         const StepTraffic& traffic, bool d_fastest, const std::string& label) {
  const int pp = layout.pp, dp = layout.dp;
  const double ring_edge = ring_edge_bytes(traffic.dp_allreduce_bytes, dp);
  // Estimated bytes leaving one level's domains when its tiles are a x b (the tp factor is common to all shapes).
  auto estimate = [&](int a, int b) {
    const double dp_crossings = b < dp ? static_cast<double>(pp) * (dp / b) * ring_edge : 0.0;
    const double pp_crossings = static_cast<double>(dp) * (pp / a - 1) * traffic.pp_activation_bytes;
    return dp_crossings + pp_crossings;
  };

  // tiles[k] = (A_k, B_k), nested; the last one is the whole grid.
  std::vector<std::pair<int, int>> tiles;
  std::pair<int, int> below{1, 1};
  for (long room : units_per_domain) {
    std::pair<int, int> pick = below;
    double pick_cost = -1;
    for (int a : divisors(pp)) {
      if (a % below.first != 0) continue;
      for (int b : divisors(dp)) {
        if (b % below.second != 0 || static_cast<long>(a) * b > room) continue;
        const double cost = estimate(a, b);
        // Ties go to the larger tile, then to the wider one (DP rows first): deterministic.
        if (pick_cost < 0 || cost < pick_cost ||
            (cost == pick_cost && static_cast<long>(a) * b > static_cast<long>(pick.first) * pick.second)) {
          pick = {a, b};
          pick_cost = cost;
        }
      }
    }
    tiles.push_back(pick);
    below = pick;
  }
  tiles.emplace_back(pp, dp);

  Arrangement arr;
  arr.name = "topology:nested-tiles(" + label;
  for (std::size_t k = 0; k + 1 < tiles.size(); ++k)
    arr.name += (k ? "," : ":") + std::to_string(tiles[k].first) + "x" + std::to_string(tiles[k].second);
  arr.name += ")";
  arr.unit_at_position.resize(static_cast<std::size_t>(pp) * dp);
  for (int p = 0; p < pp; ++p) {
    for (int d = 0; d < dp; ++d) {
      // Mixed radix: at each level, the index of the sub-tile holding (p, d) inside its tile.
      long position = 0, size_below = 1;
      int a_below = 1, b_below = 1;
      for (const auto& [a, b] : tiles) {
        const int grid_a = a / a_below, grid_b = b / b_below;
        const int sa = (p % a) / a_below, sb = (d % b) / b_below;
        const long index = d_fastest ? sb + static_cast<long>(grid_b) * sa : sa + static_cast<long>(grid_a) * sb;
        position += index * size_below;
        size_below *= static_cast<long>(grid_a) * grid_b;
        a_below = a;
        b_below = b;
      }
      arr.unit_at_position[static_cast<std::size_t>(position)] = d + dp * p;
    }
  }
  for (auto it = tiles.rbegin(); it != tiles.rend(); ++it)
    arr.grains.push_back(static_cast<long>(it->first) * it->second);
  return arr;
}

}  // namespace tenax::placement_detail
