// SwitchTree: validation and queries shared by both sources (topology.conf and SLURM_TOPOLOGY_ADDR).
#include <algorithm>
#include <string>
#include <vector>

#include "placement/quote.hpp"
#include "tenax/error.hpp"
#include "tenax/topology.hpp"

namespace tenax {

void SwitchTree::finish(std::string_view origin) {
  const std::size_t n = switches_.size();
  // Levels bottom-up, without recursion (a chain of switches must not exhaust the stack): a switch's level is final
  // once every child switch's is. Each switch has at most one parent (both builders ensure it), so the switches never
  // finished are exactly those on a cycle.
  std::vector<std::size_t> waiting(n);  // child switches whose level is not final yet
  std::vector<int> ready;
  for (std::size_t s = 0; s < n; ++s) {
    switches_[s].level = 1;
    waiting[s] = switches_[s].child_switches.size();
    if (waiting[s] == 0) ready.push_back(static_cast<int>(s));
  }
  std::size_t finished = 0;
  while (!ready.empty()) {
    const int s = ready.back();
    ready.pop_back();
    ++finished;
    if (switches_[s].level > kMaxSwitchLevels)
      throw UsageError(std::string(origin) + ": switch " + placement_detail::quote_input(switches_[s].name) +
                       " is more than " + std::to_string(kMaxSwitchLevels) +
                       " levels above its nodes; tenax places on trees of at most " + std::to_string(kMaxSwitchLevels) +
                       " levels: check the Switches= lists for a chain by mistake");
    const int parent = switches_[s].parent;
    if (parent < 0) continue;
    switches_[parent].level = std::max(switches_[parent].level, switches_[s].level + 1);
    if (--waiting[parent] == 0) ready.push_back(parent);
  }
  if (finished != n) {
    for (std::size_t s = 0; s < n; ++s) {
      if (waiting[s] != 0)
        throw UsageError(std::string(origin) + ": switch " + placement_detail::quote_input(switches_[s].name) +
                         " is its own descendant (a cycle in Switches=); every switch must have one parent");
    }
  }

  switch_of_node_.clear();
  for (std::size_t s = 0; s < n; ++s) {
    for (const std::string& node : switches_[s].nodes) {
      auto [it, inserted] = switch_of_node_.emplace(node, static_cast<int>(s));
      if (!inserted && it->second != static_cast<int>(s))
        throw UsageError(std::string(origin) + ": node " + placement_detail::quote_input(node) +
                         " is attached to both switch " + placement_detail::quote_input(switches_[it->second].name) +
                         " and switch " + placement_detail::quote_input(switches_[s].name) +
                         "; list each node under one switch only");
    }
  }
}

int SwitchTree::height() const {
  int h = 0;
  for (const Switch& s : switches_)
    h = std::max(h, s.level);
  return h;
}

int SwitchTree::switch_of_node(std::string_view node) const {
  auto it = switch_of_node_.find(std::string(node));
  return it == switch_of_node_.end() ? -1 : it->second;
}

std::vector<int> SwitchTree::path_of_node(std::string_view node) const {
  std::vector<int> path;
  for (int s = switch_of_node(node); s >= 0; s = switches_[s].parent)
    path.push_back(s);
  return path;
}

}  // namespace tenax
