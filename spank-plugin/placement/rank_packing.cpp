#include "placement/rank_packing.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace tenax::placement_detail {
namespace {

// Free room of a switch's children for best-fit and most-room look-ups (lowest index among equals). Switches have
// few children (nodes of a leaf, leaves of an aggregation switch): a linear scan beats a tree there; a flat tree
// with thousands of children under one switch uses the ordered set.
class Bins {
 public:
  explicit Bins(const std::vector<long>& room) : room_(room), indexed_(room.size() > kLinearLimit) {
    if (indexed_)
      for (int c = 0; c < static_cast<int>(room_.size()); ++c)
        if (room_[c] > 0) by_room_.emplace(room_[c], c);
  }
  // The child with the least room >= need, or -1.
  int best_fit(long need) const {
    if (indexed_) {
      auto it = by_room_.lower_bound({need, -1});
      return it == by_room_.end() ? -1 : it->second;
    }
    int best = -1;
    for (int c = 0; c < static_cast<int>(room_.size()); ++c)
      if (room_[c] >= need && (best < 0 || room_[c] < room_[best])) best = c;
    return best;
  }
  // The child with the most room, or -1 when all are full.
  int most_room() const {
    if (indexed_) {
      if (by_room_.empty()) return -1;
      return by_room_.lower_bound({by_room_.rbegin()->first, -1})->second;
    }
    int best = -1;
    for (int c = 0; c < static_cast<int>(room_.size()); ++c)
      if (room_[c] > 0 && (best < 0 || room_[c] > room_[best])) best = c;
    return best;
  }
  long room(int c) const { return room_[c]; }
  void take(int c, long amount) {
    if (indexed_) by_room_.erase({room_[c], c});
    room_[c] -= amount;
    if (indexed_ && room_[c] > 0) by_room_.emplace(room_[c], c);
  }

 private:
  static constexpr std::size_t kLinearLimit = 64;
  std::vector<long> room_;
  bool indexed_;
  std::set<std::pair<long, int>> by_room_;
};

// Splits the positions of one switch (sorted) among its children; returns one sorted list per child.
std::vector<std::vector<int>> split_among_children(const std::vector<int>& positions, const std::vector<long>& room,
                                                   const std::vector<long>& grains, int weight) {
  std::vector<std::vector<int>> out(room.size());
  for (std::size_t c = 0; c < room.size(); ++c)
    out[c].reserve(static_cast<std::size_t>(std::min<long>(room[c] / weight, static_cast<long>(positions.size()))));
  Bins bins(room);
  std::vector<int> pending = positions;
  for (long grain : grains) {
    if (grain <= 1 || pending.empty()) continue;
    // Groups = runs of pending positions with the same position / grain.
    struct Group {
      std::size_t begin, end;
    };
    std::vector<Group> groups;
    for (std::size_t i = 0; i < pending.size();) {
      // One division per group: the group ends where the next multiple of the grain begins.
      const long limit = (pending[i] / grain + 1) * grain;
      std::size_t j = i + 1;
      while (j < pending.size() && pending[j] < limit)
        ++j;
      groups.push_back({i, j});
      i = j;
    }
    // Largest first (best-fit decreasing); position order among equals keeps the result deterministic.
    std::stable_sort(groups.begin(), groups.end(),
                     [](const Group& a, const Group& b) { return a.end - a.begin > b.end - b.begin; });
    std::vector<char> placed(pending.size(), 0);
    for (const Group& g : groups) {
      const long size = static_cast<long>(g.end - g.begin) * weight;
      const int child = bins.best_fit(size);
      if (child < 0) continue;
      bins.take(child, size);
      for (std::size_t i = g.begin; i < g.end; ++i) {
        out[child].push_back(pending[i]);
        placed[i] = 1;
      }
    }
    std::vector<int> rest;
    for (std::size_t i = 0; i < pending.size(); ++i)
      if (!placed[i]) rest.push_back(pending[i]);
    pending = std::move(rest);
  }
  // Stream the rest: fill the child with the most room, then the next.
  int current = -1;
  for (int position : pending) {
    if (current < 0 || bins.room(current) < weight) current = bins.most_room();
    bins.take(current, weight);
    out[current].push_back(position);
  }
  for (auto& list : out)
    std::sort(list.begin(), list.end());
  return out;
}

}  // namespace

PackingTree build_packing_tree(const JobTopology& job, const std::vector<int>& node_capacity) {
  PackingTree tree;
  const int top = job.top_level;
  tree.children.resize(static_cast<std::size_t>(top) + 1);
  tree.capacity.resize(static_cast<std::size_t>(top) + 1);
  for (int k = 0; k <= top; ++k)
    tree.capacity[k].assign(static_cast<std::size_t>(job.domain_count[k]), 0);
  for (int k = 1; k <= top; ++k)
    tree.children[k].resize(static_cast<std::size_t>(job.domain_count[k]));
  for (int k = 1; k <= top; ++k) {
    std::vector<char> seen(static_cast<std::size_t>(job.domain_count[k - 1]), 0);
    for (int n = 0; n < job.num_nodes; ++n) {
      const int below = job.domain_of(n, k - 1);
      if (seen[below]) continue;
      seen[below] = 1;
      tree.children[k][job.domain_of(n, k)].push_back(below);
    }
    for (auto& list : tree.children[k])
      std::sort(list.begin(), list.end());
  }
  for (int n = 0; n < job.num_nodes; ++n)
    for (int k = 0; k <= top; ++k)
      tree.capacity[k][job.domain_of(n, k)] += node_capacity[n];
  return tree;
}

std::vector<SlotRef> pack_items(const JobTopology& job, const PackingTree& tree, int count, int weight,
                                const std::vector<long>& grains) {
  const int top = job.top_level;
  // positions[x]: sorted positions handed to domain x of the current level.
  std::vector<std::vector<int>> positions(1);
  positions[0].resize(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i)
    positions[0][i] = i;

  for (int k = top; k >= 1; --k) {
    std::vector<std::vector<int>> below(static_cast<std::size_t>(job.domain_count[k - 1]));
    for (int x = 0; x < job.domain_count[k]; ++x) {
      if (positions[x].empty()) continue;
      const std::vector<int>& kids = tree.children[k][x];
      if (kids.size() == 1) {  // a pass-through level
        below[kids[0]] = std::move(positions[x]);
        continue;
      }
      std::vector<long> room(kids.size());
      for (std::size_t c = 0; c < kids.size(); ++c)
        room[c] = tree.capacity[k - 1][kids[c]];
      std::vector<std::vector<int>> parts = split_among_children(positions[x], room, grains, weight);
      for (std::size_t c = 0; c < kids.size(); ++c)
        below[kids[c]] = std::move(parts[c]);
    }
    positions = std::move(below);
  }

  std::vector<SlotRef> first_slot(static_cast<std::size_t>(count));
  for (int n = 0; n < job.num_nodes; ++n) {
    int slot = 0;
    for (int position : positions[n]) {
      first_slot[position] = SlotRef{n, slot};
      slot += weight;
    }
  }
  return first_slot;
}

}  // namespace tenax::placement_detail
