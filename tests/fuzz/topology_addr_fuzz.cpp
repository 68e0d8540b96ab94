// SLURM_TOPOLOGY_ADDR values with their SLURM_TOPOLOGY_ADDR_PATTERN: the first line is the pattern, every further line
// one node's address.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= input.size()) {
    std::size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    lines.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  const std::string pattern = lines.front();
  lines.erase(lines.begin());
  try {
    const tenax::SwitchTree tree = tenax::SwitchTree::from_topology_addresses(lines, pattern);
    if (tree.height() > tenax::kMaxSwitchLevels) __builtin_trap();
    for (const std::string& address : lines) {
      const std::string node = address.substr(address.rfind('.') + 1);
      if (!tree.empty() && tree.switch_of_node(node) < 0) __builtin_trap();  // every address's node is in the tree
    }
  } catch (const tenax::UsageError&) {
    // an address that does not fit its pattern, or a tree that is not one: the parser's own refusal
  }
  return 0;
}
