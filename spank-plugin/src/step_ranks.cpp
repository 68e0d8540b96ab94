#include "step_ranks.hpp"

#include <charconv>
#include <numeric>

#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"

namespace tenax::spank {

int StepShape::total_tasks() const {
  return std::accumulate(tasks_per_node.begin(), tasks_per_node.end(), 0);
}

namespace {

int parse_positive(std::string_view text, std::string_view whole) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value < 0) {
    throw UsageError("SLURM_STEP_TASKS_PER_NODE=" + std::string(whole) + ": '" + std::string(text) +
                     "' is not a task count (expected a list such as 4,2,1(x2))");
  }
  return value;
}

}  // namespace

std::vector<int> expand_tasks_per_node(std::string_view text) {
  std::vector<int> counts;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    int repeat = 1;
    if (const auto paren = item.find("(x"); paren != std::string_view::npos) {
      if (item.back() != ')') parse_positive(item, text);  // throws with the message
      repeat = parse_positive(item.substr(paren + 2, item.size() - paren - 3), text);
      item = item.substr(0, paren);
    }
    const int count = parse_positive(item, text);
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), count);
    start = end + 1;
  }
  return counts;
}

StepShape step_shape(std::string_view nodelist, std::string_view tasks_per_node) {
  StepShape shape;
  shape.nodes = expand_hostlist(nodelist);
  shape.tasks_per_node = expand_tasks_per_node(tasks_per_node);
  if (shape.nodes.empty() || shape.nodes.size() != shape.tasks_per_node.size()) {
    throw UsageError("the step's node list '" + std::string(nodelist) + "' (" + std::to_string(shape.nodes.size()) +
                     " nodes) does not match its tasks per node '" + std::string(tasks_per_node) + "' (" +
                     std::to_string(shape.tasks_per_node.size()) + " entries)");
  }
  return shape;
}

ParallelLayout resolve_layout(const std::optional<LayoutRequest>& request, int world_size, std::string_view source) {
  ParallelLayout layout;
  const LayoutRequest wanted = request.value_or(LayoutRequest{});
  layout.tp = wanted.tp;
  layout.pp = wanted.pp;
  if (wanted.dp == 0) {
    const int model = wanted.tp * wanted.pp;
    if (world_size % model != 0) {
      throw UsageError(std::string(source) + ": tp*pp = " + std::to_string(model) + " does not divide the step's " +
                       std::to_string(world_size) + " tasks; launch a multiple of " + std::to_string(model) +
                       " tasks or change tp/pp");
    }
    layout.dp = world_size / model;
  } else {
    layout.dp = wanted.dp;
    if (static_cast<long long>(layout.tp) * layout.pp * layout.dp != world_size) {
      throw UsageError(std::string(source) + "=" + layout_to_string(layout.tp, layout.pp, layout.dp) +
                       ": tp*pp*dp = " + std::to_string(static_cast<long long>(layout.tp) * layout.pp * layout.dp) +
                       " but the step has " + std::to_string(world_size) +
                       " tasks; launch that many tasks, or leave dp out to infer it");
    }
  }
  return layout;
}

std::optional<Placement> place_step(const StepShape& shape, const ParallelLayout& layout, PlacementPolicy policy,
                                    const SwitchTree& tree) {
  if (policy == PlacementPolicy::None) return std::nullopt;
  const int per_node = shape.tasks_per_node.front();
  for (std::size_t i = 0; i < shape.nodes.size(); ++i) {
    if (shape.tasks_per_node[i] != per_node) {
      std::string counts;
      for (int c : shape.tasks_per_node)
        counts += (counts.empty() ? "" : ",") + std::to_string(c);
      throw UsageError("--tenax-placement=" + std::string(to_string(policy)) +
                       " needs the same number of tasks on every node, but this step has " + counts +
                       " tasks on its nodes; use --ntasks-per-node=N (one task per GPU), or --tenax-placement=none");
    }
  }
  if (policy == PlacementPolicy::Block) return block_placement(shape.nodes, per_node, layout);
  return place_ranks(shape.nodes, tree, per_node, layout);
}

}  // namespace tenax::spank
