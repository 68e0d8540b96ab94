// Placement by simulation: synthetic fragmented allocations on a three-level fat tree (32 nodes per leaf switch,
// 16 leaves per aggregation switch), up to 4,096 nodes x 8 GPUs. For each case it prints the traffic that leaves the
// leaf switches and the total cost (bytes x levels climbed) for tenax's placement, for the naive SLURM_PROCID (block)
// order and for the lower bound, all measured in the same run, and the time place_ranks takes.
//
// Times: the median wall-clock time and the median CPU time of the placing thread over --repeat runs. The target
// (--target-ms, 100 ms, for the largest world) is checked on the CPU time, which does not count time the thread
// waits for a core on a shared machine; the wall time is printed beside it. Exit status 1 when the target is missed
// or when any case costs more than the naive order.
//
//   bench_placement [--quick] [--repeat N] [--target-ms MS] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "tenax/placement.hpp"

namespace {

using tenax::ParallelLayout;

constexpr int kLeafSize = 32;
constexpr int kLeavesPerAggregation = 16;
constexpr int kGpusPerNode = 8;

struct Allocation {
  std::string topology_conf;
  std::vector<std::string> nodes;  // in SLURM_JOB_NODELIST order (sorted by name)
};

std::string node_name(int index) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "c%05d", index);
  return buffer;
}

// A job of `want` nodes on a busy cluster: each leaf it touches has only a random share (min_free..100%) of its nodes
// free. cabled_by_name: node names follow the cabling (Slurm's sorted node list is then in switch order); otherwise
// names are scattered over the leaves, as on clusters renumbered after repairs or expansions.
Allocation make_allocation(std::mt19937& rng, int want, double min_free, bool cabled_by_name) {
  const int leaves = (want * 4) / kLeafSize + 4;  // more than enough leaves
  const int total_nodes = leaves * kLeafSize;
  std::vector<int> name_of_position(static_cast<std::size_t>(total_nodes));
  for (int i = 0; i < total_nodes; ++i)
    name_of_position[i] = i;
  if (!cabled_by_name) std::shuffle(name_of_position.begin(), name_of_position.end(), rng);

  Allocation a;
  for (int l = 0; l < leaves; ++l) {
    std::vector<std::string> members;
    for (int i = 0; i < kLeafSize; ++i)
      members.push_back(node_name(name_of_position[l * kLeafSize + i]));
    a.topology_conf += "SwitchName=leaf" + std::to_string(l) + " Nodes=" + tenax::compress_hostlist(members) + "\n";
  }
  const int aggregations = (leaves + kLeavesPerAggregation - 1) / kLeavesPerAggregation;
  for (int g = 0; g < aggregations; ++g)
    a.topology_conf += "SwitchName=agg" + std::to_string(g) + " Switches=leaf[" +
                       std::to_string(g * kLeavesPerAggregation) + "-" +
                       std::to_string(std::min(leaves, (g + 1) * kLeavesPerAggregation) - 1) + "]\n";
  a.topology_conf += "SwitchName=core Switches=agg[0-" + std::to_string(aggregations - 1) + "]\n";

  std::uniform_real_distribution<double> free_share(min_free, 1.0);
  std::vector<int> chosen;
  for (int l = 0; l < leaves && static_cast<int>(chosen.size()) < want; ++l) {
    std::vector<int> positions(kLeafSize);
    for (int i = 0; i < kLeafSize; ++i)
      positions[i] = l * kLeafSize + i;
    std::shuffle(positions.begin(), positions.end(), rng);
    int take = std::max(1, static_cast<int>(free_share(rng) * kLeafSize + 0.5));
    take = std::min({take, kLeafSize, want - static_cast<int>(chosen.size())});
    for (int i = 0; i < take; ++i)
      chosen.push_back(name_of_position[positions[i]]);
  }
  std::sort(chosen.begin(), chosen.end());
  for (int n : chosen)
    a.nodes.push_back(node_name(n));
  return a;
}

struct Case {
  int nodes;
  int tp, pp, dp;
  double min_free;
  bool cabled_by_name;
  const char* traffic_name;
  tenax::StepTraffic traffic;
};

tenax::StepTraffic traffic_of(double tp_gib, double pp_gib, double dp_gib) {
  tenax::StepTraffic t;
  t.tp_allreduce_bytes = tp_gib * (1 << 30);
  t.pp_activation_bytes = pp_gib * (1 << 30);
  t.dp_allreduce_bytes = dp_gib * (1 << 30);
  return t;
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double level_gib(const tenax::TrafficCost& c, std::size_t level) {
  return level < c.crossing.size() ? c.crossing[level].total() / (1 << 30) : 0.0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int repeat = 5;
  double target_ms = 100.0;
  unsigned seed = 20261122;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--target-ms") && i + 1 < argc) {
      target_ms = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--repeat N] [--target-ms MS] [--seed S]\n", argv[0]);
      return 2;
    }
  }

  const tenax::StepTraffic standard = traffic_of(8, 0.5, 2);  // the StepTraffic defaults
  const tenax::StepTraffic pp_heavy = traffic_of(8, 4, 1);
  std::vector<Case> cases = {
      {64, 8, 1, 64, 0.25, true, "default", standard},     {64, 8, 4, 16, 0.25, true, "default", standard},
      {64, 8, 4, 16, 0.25, false, "default", standard},    {512, 8, 4, 128, 0.25, true, "default", standard},
      {512, 8, 4, 128, 0.25, true, "pp-heavy", pp_heavy},  {512, 4, 8, 128, 0.5, true, "default", standard},
      {512, 8, 4, 128, 0.25, false, "default", standard},  {4096, 8, 8, 512, 0.25, true, "default", standard},
      {4096, 8, 8, 512, 0.25, true, "pp-heavy", pp_heavy}, {4096, 8, 8, 512, 0.25, false, "default", standard},
      {4096, 1, 8, 4096, 0.25, true, "default", standard}, {4096, 2, 16, 1024, 0.5, true, "default", standard},
  };
  if (quick) cases.resize(4);

  std::printf("# tenax placement by simulation: 32 nodes/leaf switch, 16 leaves/aggregation switch, %d GPUs/node\n",
              kGpusPerNode);
  std::printf("# GiB per step: xleaf = leaving leaf switches, xagg = leaving aggregation switches, cost = bytes x\n");
  std::printf(
      "# levels climbed (what placement minimises); bl = SLURM_PROCID block order, tx = tenax, lb = lower bound\n");
  std::printf("# %5s %4s %3s %3s %5s %4s %-8s %-6s | %8s %8s %8s %5s | %8s %8s %8s | %9s %9s %9s | %7s %7s  %s\n",
              "nodes", "leaf", "tp", "pp", "dp", "free", "traffic", "names", "xleaf-bl", "xleaf-tx", "xleaf-lb",
              "tx/bl", "xagg-bl", "xagg-tx", "xagg-lb", "cost-bl", "cost-tx", "cost-lb", "wall-ms", "cpu-ms",
              "strategy");

  std::mt19937 rng(seed);
  bool ok = true;
  double largest_ms = 0, largest_wall_ms = 0;
  int largest_world = 0;
  const double gib = 1 << 30;
  for (const Case& c : cases) {
    const Allocation a = make_allocation(rng, c.nodes, c.min_free, c.cabled_by_name);
    const tenax::SwitchTree tree = tenax::SwitchTree::from_topology_conf(a.topology_conf);
    ParallelLayout layout;
    layout.tp = c.tp;
    layout.pp = c.pp;
    layout.dp = c.dp;

    std::vector<double> ms, cpu_ms;
    tenax::Placement placed;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = thread_cpu_ms();
      placed = tenax::place_ranks(a.nodes, tree, kGpusPerNode, layout, c.traffic);
      cpu_ms.push_back(thread_cpu_ms() - cpu_start);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    const tenax::TrafficCost tenax_cost = tenax::traffic_cost(placed, tree, c.traffic);
    const tenax::TrafficCost block_cost =
        tenax::traffic_cost(tenax::block_placement(a.nodes, kGpusPerNode, layout), tree, c.traffic);
    const tenax::TrafficCost bound = tenax::traffic_lower_bound(a.nodes, tree, kGpusPerNode, layout, c.traffic);

    int leaves_used = 0;
    {
      std::vector<int> leaf_ids;
      for (const std::string& n : a.nodes)
        leaf_ids.push_back(tree.switch_of_node(n));
      std::sort(leaf_ids.begin(), leaf_ids.end());
      leaves_used = static_cast<int>(std::unique(leaf_ids.begin(), leaf_ids.end()) - leaf_ids.begin());
    }
    const double ratio = level_gib(block_cost, 1) > 0 ? level_gib(tenax_cost, 1) / level_gib(block_cost, 1) : 1.0;
    std::printf(
        "  %5d %4d %3d %3d %5d %3.0f%% %-8s %-6s | %8.0f %8.0f %8.0f %4.0f%% | %8.0f %8.0f %8.0f | %9.0f %9.0f %9.0f | "
        "%7.1f %7.1f  %s\n",
        c.nodes, leaves_used, c.tp, c.pp, c.dp, c.min_free * 100, c.traffic_name, c.cabled_by_name ? "cabled" : "mixed",
        level_gib(block_cost, 1), level_gib(tenax_cost, 1), level_gib(bound, 1), ratio * 100, level_gib(block_cost, 2),
        level_gib(tenax_cost, 2), level_gib(bound, 2), block_cost.total() / gib, tenax_cost.total() / gib,
        bound.total() / gib, median(ms), median(cpu_ms), placed.strategy.c_str());
    if (tenax_cost.total() > block_cost.total() * (1 + 1e-12)) {
      std::printf("  ^ FAIL: tenax costs more than the block order\n");
      ok = false;
    }
    const int world = c.tp * c.pp * c.dp;
    if (world > largest_world) largest_ms = 0;
    if (world >= largest_world) {
      largest_world = world;
      largest_ms = std::max(largest_ms, median(cpu_ms));
      largest_wall_ms = std::max(largest_wall_ms, median(ms));
    }
  }
  std::printf(
      "# largest world: %d ranks placed in %.1f ms CPU (%.1f ms wall), slowest layout, median of %d; target "
      "< %.0f ms: %s\n",
      largest_world, largest_ms, largest_wall_ms, repeat, target_ms, largest_ms < target_ms ? "PASS" : "FAIL");
  if (largest_ms >= target_ms) ok = false;
  return ok ? 0 : 1;
}
