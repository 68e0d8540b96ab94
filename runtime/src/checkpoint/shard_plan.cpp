#include "checkpoint/shard_plan.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "checkpoint/manifest.hpp"
#include "checkpoint/names.hpp"

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"

namespace tenax::ckpt {

void normalize_shards(std::vector<TensorShard>& shards) {
  for (auto& s : shards) {
    if (auto problem = tensor_name_problem(s.name))
      throw UsageError("checkpoint tensor name '" + s.name + "' " + *problem + " (" + kTensorNameRule + ")");
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
      if (!inside(Box{s.offset, s.shape}, s.global_shape))
        throw UsageError(who + ": block at " + dims_string(s.offset) + " of shape " + dims_string(s.shape) +
                         " reaches beyond the global shape " + dims_string(s.global_shape));
    }
    try {
      byte_size(s.global_shape, dtype_size(s.dtype));
    } catch (const std::overflow_error&) {
      throw UsageError(who + ": global shape " + dims_string(s.global_shape) + " has more bytes than 64 bits count");
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

// Each distinct block is written by one of the ranks that hold it. Spreading the blocks over their holders by size
// (largest first, each to the holder with the fewest bytes so far, ties to the lowest rank) lets every data-parallel
// replica write its share instead of one replica writing everything while the others wait; it is deterministic, so
// every rank computes the same plan.
void assign_writers(Plan& plan, const std::vector<std::vector<int>>& holders, std::size_t ranks) {
  std::vector<std::uint64_t> bytes(plan.blocks.size());
  std::vector<std::size_t> order(plan.blocks.size());
  for (std::size_t b = 0; b < plan.blocks.size(); ++b) {
    order[b] = b;
    bytes[b] = byte_size(plan.blocks[b].box.shape, dtype_size(plan.tensors[plan.blocks[b].tensor].dtype));
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bytes[a] > bytes[b]; });
  std::vector<std::uint64_t> load(ranks, 0);
  for (std::size_t b : order) {
    int best = holders[b].front();  // ascending ranks
    for (int r : holders[b])
      if (load[r] < load[best]) best = r;
    plan.blocks[b].writer = best;
    load[best] += bytes[b];
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
  std::vector<std::vector<int>> holders;          // per block, ascending
  std::map<std::pair<Dims, Dims>, int> distinct;  // (offset, shape) -> block, per tensor
  for (const auto& [name, held] : by_name) {
    const Held& first = held.front();
    PlannedTensor t{name, first.dtype, first.global_shape, {}};
    for (const Held& h : held) {
      if (h.dtype != first.dtype || h.global_shape != first.global_shape)
        throw UsageError("checkpoint tensor '" + name + "': rank " + std::to_string(first.rank) + " holds it as " +
                         std::string(dtype_name(first.dtype)) + " " + dims_string(first.global_shape) + ", rank " +
                         std::to_string(h.rank) + " as " + std::string(dtype_name(h.dtype)) + " " +
                         dims_string(h.global_shape) + ": every rank must describe the same global tensor");
      auto [it, added] = distinct.emplace(std::pair(h.box.offset, h.box.shape), static_cast<int>(plan.blocks.size()));
      if (!added) {  // a replica of a block a lower rank holds
        if (holders[it->second].back() != h.rank) holders[it->second].push_back(h.rank);
        continue;
      }
      t.blocks.push_back(static_cast<int>(plan.blocks.size()));
      plan.blocks.push_back(PlannedBlock{static_cast<int>(plan.tensors.size()), h.box, h.rank, {}});
      holders.push_back({h.rank});
    }
    distinct.clear();
    std::vector<const Box*> boxes;
    for (int b : t.blocks)
      boxes.push_back(&plan.blocks[b].box);
    if (auto problem = check_tiling(t.global_shape, boxes)) {
      if (problem->kind == TilingProblem::Uncovered)
        throw UsageError("checkpoint tensor '" + name + "' " + dims_string(t.global_shape) +
                         ": the ranks' blocks cover " + std::to_string(problem->covered) + " of its " +
                         std::to_string(volume(t.global_shape)) + " elements; every element must be held by some rank");
      // Shards were checked against their own global shape, so the only other problem is an overlap.
      const PlannedBlock& a = plan.blocks[t.blocks[problem->first]];
      const PlannedBlock& b = plan.blocks[t.blocks[problem->second]];
      throw UsageError("checkpoint tensor '" + name + "': rank " + std::to_string(a.writer) + "'s block at " +
                       dims_string(a.box.offset) + " of shape " + dims_string(a.box.shape) + " overlaps rank " +
                       std::to_string(b.writer) + "'s block at " + dims_string(b.box.offset) + " of shape " +
                       dims_string(b.box.shape) + ": blocks held by several ranks must be identical or disjoint");
    }
    plan.tensors.push_back(std::move(t));
  }
  assign_writers(plan, holders, per_rank.size());

  for (const PlannedTensor& t : plan.tensors) {
    std::map<int, int> in_file;  // blocks of this tensor per writer
    for (int b : t.blocks)
      ++in_file[plan.blocks[b].writer];
    std::map<int, int> ordinal;
    for (int b : t.blocks) {
      PlannedBlock& block = plan.blocks[b];
      block.dataset = block_dataset(t.name, ordinal[block.writer]++, in_file[block.writer]);
    }
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
