// SwitchTree from SLURM_TOPOLOGY_ADDR ("s1.s3.n7") and SLURM_TOPOLOGY_ADDR_PATTERN ("switch.switch.node").
#include <string>
#include <unordered_map>
#include <vector>

#include "placement/quote.hpp"
#include "tenax/error.hpp"
#include "tenax/topology.hpp"

namespace tenax {
namespace {

std::vector<std::string> split_dots(std::string_view text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = text.find('.', start);
    parts.emplace_back(text.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

SwitchTree SwitchTree::from_topology_addresses(const std::vector<std::string>& addresses, std::string_view pattern) {
  using placement_detail::quote_input;
  const std::vector<std::string> kinds = split_dots(pattern);
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const bool last = i + 1 == kinds.size();
    if (kinds[i] != (last ? "node" : "switch"))
      throw UsageError("SLURM_TOPOLOGY_ADDR_PATTERN " + quote_input(pattern) +
                       " is not understood; expected \"switch\" components followed by one \"node\", e.g. "
                       "\"switch.switch.node\"");
  }

  // Every address has as many switches as the pattern: refuse a deep pattern before building anything.
  if (kinds.size() - 1 > static_cast<std::size_t>(kMaxSwitchLevels))
    throw UsageError("SLURM_TOPOLOGY_ADDR_PATTERN " + quote_input(pattern) + " has " +
                     std::to_string(kinds.size() - 1) + " switch levels, more than " +
                     std::to_string(kMaxSwitchLevels) + " levels; tenax places on trees of at most " +
                     std::to_string(kMaxSwitchLevels) + " levels");

  SwitchTree tree;
  std::unordered_map<std::string, int> index;
  std::unordered_map<std::string, int> node_switch;
  for (const std::string& address : addresses) {
    const std::vector<std::string> parts = split_dots(address);
    if (parts.size() != kinds.size())
      throw UsageError("SLURM_TOPOLOGY_ADDR " + quote_input(address) + " has " + std::to_string(parts.size()) +
                       " components but the pattern " + quote_input(pattern) + " has " + std::to_string(kinds.size()) +
                       "; gather addresses and pattern from the same cluster");
    for (const std::string& part : parts)
      if (part.empty())
        throw UsageError("SLURM_TOPOLOGY_ADDR " + quote_input(address) + " has an empty component; check the address");

    int parent = -1;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      auto [it, inserted] = index.emplace(parts[i], static_cast<int>(tree.switches_.size()));
      if (inserted) {
        Switch s;
        s.name = parts[i];
        s.parent = parent;
        tree.switches_.push_back(std::move(s));
        if (parent >= 0) tree.switches_[parent].child_switches.push_back(it->second);
      } else if (tree.switches_[it->second].parent != parent) {
        const int old_parent = tree.switches_[it->second].parent;
        throw UsageError("SLURM_TOPOLOGY_ADDR " + quote_input(address) + " puts switch " + quote_input(parts[i]) +
                         " under " + (parent < 0 ? std::string("the top") : quote_input(tree.switches_[parent].name)) +
                         " but another address puts it under " +
                         (old_parent < 0 ? std::string("the top") : quote_input(tree.switches_[old_parent].name)) +
                         "; addresses must describe one tree");
      }
      parent = it->second;
    }
    const std::string& node = parts.back();
    auto [it, inserted] = node_switch.emplace(node, parent);
    if (!inserted) {
      if (it->second != parent)
        throw UsageError("SLURM_TOPOLOGY_ADDR gives node " + quote_input(node) +
                         " two different addresses; give each node one address");
      continue;  // the same address twice (e.g. one per task) adds nothing
    }
    if (parent >= 0) tree.switches_[parent].nodes.push_back(node);
  }
  tree.finish("SLURM_TOPOLOGY_ADDR");
  return tree;
}

}  // namespace tenax
