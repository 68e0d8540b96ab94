// The cluster's switch tree, as Slurm describes it (topology/tree plugin).
//
// Contract (pure, thread-safe once built, only the C++ standard library; usable inside the SPANK plugin):
//   - Levels: compute nodes are level 0; a switch whose children are nodes only is level 1 ("leaf switch"); any other
//     switch is one above its highest child switch (Slurm numbers the same tree from 0 at the leaves).
//   - Sources: topology.conf text (SwitchName=<name> Nodes=<hostlist> | Switches=<hostlist> [LinkSpeed=<n>], '#'
//     comments, '\' line continuations, case-insensitive keys, LinkSpeed ignored) or the SLURM_TOPOLOGY_ADDR values of
//     the job's nodes with their SLURM_TOPOLOGY_ADDR_PATTERN ("s1.s3.n7" with "switch.switch.node").
//   - Errors (tenax::UsageError, naming the line or the address and the fix): unknown keys, a switch defined twice, a
//     child switch that is never defined, a switch or node with two parents, a cycle, an address that does not match
//     its pattern, a tree more than kMaxSwitchLevels switch levels high, a topology.conf larger than
//     kMaxTopologyConfBytes or whose Nodes= and Switches= lists name more than kMaxHostlistHosts names (or
//     kMaxHostlistChars characters) in all. Long values are quoted in part. Nothing recurses over the tree, so no
//     input can exhaust the stack.
//   - Several top-level switches are allowed: placement and the cost model treat them as joined by one extra switch
//     above them all. A node that the tree does not contain is NOT an error: it is treated as alone on its own leaf
//     switch hanging from that top, i.e. as far from every other node as the tree allows (the pessimistic choice: its
//     traffic is counted as crossing every level). An empty tree (no topology known) therefore makes every node its
//     own leaf. Placement reports such nodes so callers can warn about them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tenax {

// The largest topology.conf accepted (files describing the largest clusters, hostlist-compressed, are kilobytes).
inline constexpr std::size_t kMaxTopologyConfBytes = std::size_t{1} << 24;
// The most switch levels a tree may have (fat trees and dragonflies have 2 to 4). Placement's work grows with the
// product of nodes and levels, so a deeper tree is refused rather than placed slowly.
inline constexpr int kMaxSwitchLevels = 64;

struct Switch {
  std::string name;
  int level = 1;                    // 1 = leaf switch
  int parent = -1;                  // index into SwitchTree::switches(), -1 for a top-level switch
  std::vector<int> child_switches;  // indices into SwitchTree::switches()
  std::vector<std::string> nodes;   // compute nodes attached directly to this switch
};

class SwitchTree {
 public:
  SwitchTree() = default;  // empty: no topology known

  // Parses topology.conf text. `origin` names the source in error messages (a path, or "topology.conf").
  static SwitchTree from_topology_conf(std::string_view text, std::string_view origin = "topology.conf");
  // Reads and parses a topology.conf file. Throws IoError naming the path when it cannot be read, UsageError when it
  // is larger than kMaxTopologyConfBytes (it is read no further).
  static SwitchTree from_topology_conf_file(const std::string& path);
  // Builds the tree from SLURM_TOPOLOGY_ADDR values (one per node, root switch first, node name last) that share one
  // SLURM_TOPOLOGY_ADDR_PATTERN. A pattern of "node" alone (Slurm without a topology plugin) gives an empty tree.
  static SwitchTree from_topology_addresses(const std::vector<std::string>& addresses, std::string_view pattern);

  bool empty() const { return switches_.empty(); }
  const std::vector<Switch>& switches() const { return switches_; }
  // Highest switch level in the tree (0 when empty).
  int height() const;
  // Index of the switch the node is attached to, or -1 when the tree does not contain the node.
  int switch_of_node(std::string_view node) const;
  // Switch indices from the node's switch up to its top-level switch (empty when the node is not in the tree).
  std::vector<int> path_of_node(std::string_view node) const;

 private:
  // Validates parents, levels and cycles once every switch is known; called by every builder.
  void finish(std::string_view origin);

  std::vector<Switch> switches_;
  std::unordered_map<std::string, int> switch_of_node_;
};

}  // namespace tenax
