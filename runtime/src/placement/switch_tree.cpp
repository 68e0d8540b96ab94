// SwitchTree: validation and queries shared by both sources (topology.conf and SLURM_TOPOLOGY_ADDR).
#include <algorithm>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/topology.hpp"

namespace tenax {
namespace {

constexpr int kUnvisited = 0;
constexpr int kInProgress = -1;

// Level of switch s (1 for a leaf); detects cycles with the kInProgress mark.
int compute_level(std::vector<Switch>& switches, std::vector<int>& state, int s, std::string_view origin) {
  if (state[s] == kInProgress)
    throw UsageError(std::string(origin) + ": switch \"" + switches[s].name +
                     "\" is its own descendant (a cycle in Switches=); every switch must have one parent");
  if (state[s] != kUnvisited) return state[s];
  state[s] = kInProgress;
  int level = 1;
  for (int child : switches[s].child_switches)
    level = std::max(level, 1 + compute_level(switches, state, child, origin));
  state[s] = level;
  switches[s].level = level;
  return level;
}

}  // namespace

void SwitchTree::finish(std::string_view origin) {
  const int n = static_cast<int>(switches_.size());
  std::vector<int> state(static_cast<std::size_t>(n), kUnvisited);
  // Roots first, so that a cycle (which has no root) is reported by the pass that follows.
  for (int s = 0; s < n; ++s)
    if (switches_[s].parent < 0) compute_level(switches_, state, s, origin);
  for (int s = 0; s < n; ++s)
    if (state[s] == kUnvisited) compute_level(switches_, state, s, origin);

  switch_of_node_.clear();
  for (int s = 0; s < n; ++s) {
    for (const std::string& node : switches_[s].nodes) {
      auto [it, inserted] = switch_of_node_.emplace(node, s);
      if (!inserted && it->second != s)
        throw UsageError(std::string(origin) + ": node \"" + node + "\" is attached to both switch \"" +
                         switches_[it->second].name + "\" and switch \"" + switches_[s].name +
                         "\"; list each node under one switch only");
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
