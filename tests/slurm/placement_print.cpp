// Prints the rank map the placement library computes for a job step, for the Slurm end-to-end tests to compare with
// what the plugin exported to each task:
//
//   tenax-placement-print --nodes 'n[1-4]' --slots 2 --layout 2x2x2 --policy topology --topology topology.conf
//
// One line per rank: "<rank> <node name> <slot>". Calls tenax's placement functions directly (not the plugin's glue),
// so a mistake in how the plugin gathers its inputs shows up as a mismatch.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"
#include "tenax/placement.hpp"
#include "tenax/topology.hpp"

namespace {

int usage(const char* problem) {
  std::fprintf(stderr,
               "tenax-placement-print: %s\n"
               "usage: tenax-placement-print --nodes HOSTLIST --slots N --layout TPxPPxDP --policy topology|block "
               "[--topology FILE]\n",
               problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string nodes, layout_text, policy = "topology", topology;
  int slots = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view key = argv[i];
    const char* value = argv[i + 1];
    if (key == "--nodes") {
      nodes = value;
    } else if (key == "--slots") {
      slots = std::atoi(value);
    } else if (key == "--layout") {
      layout_text = value;
    } else if (key == "--policy") {
      policy = value;
    } else if (key == "--topology") {
      topology = value;
    } else {
      return usage(("unknown argument " + std::string(key)).c_str());
    }
  }
  if ((argc - 1) % 2 != 0) return usage("every argument takes a value");
  tenax::ParallelLayout layout;
  if (nodes.empty() || slots < 1 ||
      std::sscanf(layout_text.c_str(), "%dx%dx%d", &layout.tp, &layout.pp, &layout.dp) != 3) {
    return usage("--nodes, --slots (>= 1) and --layout TPxPPxDP are required");
  }
  try {
    const auto hosts = tenax::expand_hostlist(nodes);
    tenax::Placement placement;
    if (policy == "topology") {
      const auto tree = topology.empty() ? tenax::SwitchTree{} : tenax::SwitchTree::from_topology_conf_file(topology);
      placement = tenax::place_ranks(hosts, tree, slots, layout);
    } else if (policy == "block") {
      placement = tenax::block_placement(hosts, slots, layout);
    } else {
      return usage("--policy must be topology or block");
    }
    for (std::size_t rank = 0; rank < placement.slot_of_rank.size(); ++rank) {
      const auto& where = placement.slot_of_rank[rank];
      std::printf("%zu %s %d\n", rank, placement.nodes[where.node].c_str(), where.slot);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenax-placement-print: %s\n", e.what());
    return 1;
  }
  return 0;
}
