#include "checkpoint/shard_plan.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "checkpoint/manifest.hpp"

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"

namespace tenax::ckpt {
namespace {

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == ':' || c == '/';
}

void check_name(const std::string& name) {
  auto bad = [&](const std::string& why) {
    throw UsageError("checkpoint tensor name '" + name + "' " + why +
                     " (names use letters, digits and _ . - : /, with / separating non-empty components)");
  };
  if (name.empty()) bad("is empty");
  if (name.size() > 1024) bad("is longer than 1024 characters");
  for (char c : name)
    if (!valid_name_char(c)) bad("contains '" + std::string(1, c) + "'");
  if (name.front() == '/' || name.back() == '/' || name.find("//") != std::string::npos) bad("has an empty component");
  std::istringstream parts(name);
  std::string part;
  while (std::getline(parts, part, '/'))
    if (part == "." || part == "..") bad("has a '.' or '..' component");
}

}  // namespace

void normalize_shards(std::vector<TensorShard>& shards) {
  for (auto& s : shards) {
    check_name(s.name);
    const std::string who = "checkpoint shard '" + s.name + "'";
    if (s.global_shape.empty()) throw UsageError(who + " has an empty global shape: describe a scalar as shape {1}");
    for (auto d : s.global_shape)
      if (d == 0) throw UsageError(who + " has a zero dimension in its global shape " + dims_string(s.global_shape));
    if (s.offset.empty()) s.offset.assign(s.global_shape.size(), 0);
    if (s.shape.empty()) s.shape = s.global_shape;
    if (s.offset.size() != s.global_shape.size() || s.shape.size() != s.global_shape.size())
      throw UsageError(who + ": offset " + dims_string(s.offset) + " and shape " + dims_string(s.shape) +
                       " must have as many dimensions as the global shape " + dims_string(s.global_shape));
    for (std::size_t i = 0; i < s.shape.size(); ++i) {
      if (s.shape[i] == 0) throw UsageError(who + " has a zero dimension in its shape " + dims_string(s.shape));
      if (s.offset[i] + s.shape[i] > s.global_shape[i])
        throw UsageError(who + ": block at " + dims_string(s.offset) + " of shape " + dims_string(s.shape) +
                         " reaches beyond the global shape " + dims_string(s.global_shape) + " in dimension " +
                         std::to_string(i));
    }
    if (s.data == nullptr) throw UsageError(who + " has no data pointer");
    if (s.memory == MemoryKind::Device && !TENAX_HAVE_CUDA)
      throw UsageError(who + " is in device memory but this tenax was built without CUDA (TENAX_WITH_CUDA=OFF)");
  }
  // Several blocks of one tensor are fine; the same block twice is a caller's bug (which copy would a load fill?).
  // Overlapping distinct blocks are refused by make_plan() with every rank's view.
  std::set<std::tuple<std::string, Dims, Dims>> seen;
  for (const auto& s : shards)
    if (!seen.emplace(s.name, s.offset, s.shape).second)
      throw UsageError("checkpoint shard '" + s.name + "': the block at " + dims_string(s.offset) + " of shape " +
                       dims_string(s.shape) + " is given twice on this rank; give each block once");
}

std::string describe_shards(const std::vector<TensorShard>& shards) {
  std::string out;
  for (const auto& s : shards) {
    out += s.name;
    out += ' ';
    out += dtype_name(s.dtype);
    out += ' ';
    out += std::to_string(s.global_shape.size());
    for (const Dims* d : {&s.global_shape, &s.offset, &s.shape})
      for (auto v : *d)
        out += ' ' + std::to_string(v);
    out += '\n';
  }
  return out;
}

namespace {

struct Held {
  int rank;
  DType dtype;
  Dims global_shape;
  Box box;
};

// Reads describe_shards() text. Hand-parsed with from_chars: it runs over every rank's shards on every rank, so at
// thousands of ranks a stream-based parse would dominate the constructor.
std::vector<std::pair<std::string, Held>> parse_line_set(std::string_view text, int rank) {
  auto malformed = [&] {
    return UsageError("checkpoint: malformed shard description from rank " + std::to_string(rank));
  };
  auto word = [&](std::string_view& line) {
    const std::size_t space = line.find(' ');
    std::string_view w = line.substr(0, space);
    line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
    return w;
  };
  auto number = [&](std::string_view& line) {
    std::string_view w = word(line);
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc() || end != w.data() + w.size() || w.empty()) throw malformed();
    return v;
  };
  std::vector<std::pair<std::string, Held>> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    const std::string_view name = word(line), dtype = word(line);
    const std::uint64_t n = number(line);
    if (n > 64) throw malformed();
    Held h{rank, DType::U8, Dims(n), Box{Dims(n), Dims(n)}};
    auto parsed = parse_dtype(dtype);
    if (!parsed)
      throw UsageError("checkpoint: rank " + std::to_string(rank) + " sent an unknown dtype '" + std::string(dtype) +
                       "'");
    h.dtype = *parsed;
    for (Dims* d : {&h.global_shape, &h.box.offset, &h.box.shape})
      for (auto& v : *d)
        v = number(line);
    if (!line.empty()) throw malformed();
    out.emplace_back(std::string(name), std::move(h));
  }
  return out;
}

// Refuses distinct blocks of `t` that overlap. Sorted by their first row, a block can only overlap the blocks that
// start before its last row ends, so ZeRO ranges and row splits (the common cases: thousands of blocks) cost
// n log n; blocks that all span the same rows (a column split) are compared pairwise, and there are few of those.
void refuse_overlaps(const Plan& plan, const PlannedTensor& t) {
  std::vector<int> order = t.blocks;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::pair(plan.blocks[a].box.offset[0], a) < std::pair(plan.blocks[b].box.offset[0], b);
  });
  for (std::size_t i = 0; i < order.size(); ++i) {
    const PlannedBlock& a = plan.blocks[order[i]];
    const std::uint64_t a_end = a.box.offset[0] + a.box.shape[0];
    for (std::size_t j = i + 1; j < order.size() && plan.blocks[order[j]].box.offset[0] < a_end; ++j) {
      const PlannedBlock& b = plan.blocks[order[j]];
      if (!intersect(a.box, b.box)) continue;
      const PlannedBlock& first = order[i] < order[j] ? a : b;
      const PlannedBlock& second = order[i] < order[j] ? b : a;
      throw UsageError("checkpoint tensor '" + t.name + "': rank " + std::to_string(first.writer) + "'s block at " +
                       dims_string(first.box.offset) + " of shape " + dims_string(first.box.shape) + " overlaps rank " +
                       std::to_string(second.writer) + "'s block at " + dims_string(second.box.offset) + " of shape " +
                       dims_string(second.box.shape) + ": blocks held by several ranks must be identical or disjoint");
    }
  }
}

}  // namespace

Plan make_plan(const std::vector<std::string>& per_rank) {
  std::map<std::string, std::vector<Held>> by_name;  // sorted by name; ranks ascending within
  for (int r = 0; r < static_cast<int>(per_rank.size()); ++r)
    for (auto& [name, held] : parse_line_set(per_rank[r], r))
      by_name[name].push_back(std::move(held));

  for (const auto& [name, holders] : by_name)
    for (std::size_t p = name.find('/'); p != std::string::npos; p = name.find('/', p + 1))
      if (by_name.count(name.substr(0, p)))
        throw UsageError("checkpoint tensor '" + name.substr(0, p) + "' is also a group of tensor '" + name +
                         "': rename one of them");

  Plan plan;
  std::map<std::pair<Dims, Dims>, int> distinct;  // (offset, shape) -> block, per tensor
  for (const auto& [name, holders] : by_name) {
    const Held& first = holders.front();
    PlannedTensor t{name, first.dtype, first.global_shape, {}};
    for (const Held& h : holders) {
      if (h.dtype != first.dtype || h.global_shape != first.global_shape)
        throw UsageError("checkpoint tensor '" + name + "': rank " + std::to_string(first.rank) + " holds it as " +
                         std::string(dtype_name(first.dtype)) + " " + dims_string(first.global_shape) + ", rank " +
                         std::to_string(h.rank) + " as " + std::string(dtype_name(h.dtype)) + " " +
                         dims_string(h.global_shape) + ": every rank must describe the same global tensor");
      // A replica of a block a lower rank holds: that rank writes it.
      if (!distinct.emplace(std::pair(h.box.offset, h.box.shape), static_cast<int>(plan.blocks.size())).second)
        continue;
      t.blocks.push_back(static_cast<int>(plan.blocks.size()));
      plan.blocks.push_back(PlannedBlock{static_cast<int>(plan.tensors.size()), h.box, h.rank, {}});
    }
    distinct.clear();
    refuse_overlaps(plan, t);
    std::uint64_t covered = 0;
    for (int b : t.blocks)
      covered += volume(plan.blocks[b].box.shape);
    if (covered != volume(t.global_shape))
      throw UsageError("checkpoint tensor '" + name + "' " + dims_string(t.global_shape) +
                       ": the ranks' blocks cover " + std::to_string(covered) + " of its " +
                       std::to_string(volume(t.global_shape)) + " elements; every element must be held by some rank");
    std::map<int, int> in_file;  // blocks of this tensor per writer
    for (int b : t.blocks)
      ++in_file[plan.blocks[b].writer];
    std::map<int, int> ordinal;
    for (int b : t.blocks) {
      PlannedBlock& block = plan.blocks[b];
      block.dataset = block_dataset(name, ordinal[block.writer]++, in_file[block.writer]);
    }
    plan.tensors.push_back(std::move(t));
  }
  return plan;
}

int find_block(const Plan& plan, const std::string& name, const Box& box) {
  auto it = std::lower_bound(plan.tensors.begin(), plan.tensors.end(), name,
                             [](const PlannedTensor& t, const std::string& n) { return t.name < n; });
  if (it == plan.tensors.end() || it->name != name) return -1;
  for (int b : it->blocks)
    if (plan.blocks[b].box == box) return b;
  return -1;
}

}  // namespace tenax::ckpt
