// Slurm topology.conf (topology/tree) text, as the SPANK plugin and tenax-launch read the site's file.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tenax/error.hpp"
#include "tenax/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const tenax::SwitchTree tree = tenax::SwitchTree::from_topology_conf(text, "fuzz.conf");
    // A tree that parses is a tree: bounded height, every node's path climbs strictly to a top switch.
    if (tree.height() > tenax::kMaxSwitchLevels) __builtin_trap();
    for (const tenax::Switch& s : tree.switches()) {
      for (const std::string& node : s.nodes) {
        const auto path = tree.path_of_node(node);
        if (path.empty() || path.size() > static_cast<std::size_t>(tenax::kMaxSwitchLevels)) __builtin_trap();
        for (std::size_t i = 1; i < path.size(); ++i) {
          if (tree.switches()[path[i]].level <= tree.switches()[path[i - 1]].level) __builtin_trap();
        }
        if (tree.switches()[path.back()].parent != -1) __builtin_trap();
      }
    }
  } catch (const tenax::UsageError&) {
    // malformed, or over a cap: the parser's own refusal
  }
  return 0;
}
