#include "step_ranks.hpp"

#include <charconv>
#include <numeric>

#include "input_limits.hpp"
#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"

namespace tenax::spank {

std::int64_t StepShape::total_tasks() const {
  return std::accumulate(tasks_per_node.begin(), tasks_per_node.end(), std::int64_t{0});
}

namespace {

constexpr const char* kNodelistVar = "SLURM_STEP_NODELIST";
constexpr const char* kTasksVar = "SLURM_STEP_TASKS_PER_NODE";
// Both variables are Slurm's own: a value that fails here was changed in the job's environment.
constexpr const char* kSetBySlurm =
    "the variable is set by Slurm for each step: do not set it in the job's environment";

[[noreturn]] void bad_tasks(std::string_view whole, const std::string& problem) {
  throw UsageError(shown_value(kTasksVar, whole) + ": " + problem + "; " + kSetBySlurm);
}

// A count in [1, max] (`what` says which, for the message).
std::int64_t parse_count(std::string_view text, std::string_view whole, std::int64_t max, const std::string& what) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  const bool number = !text.empty() && ptr == end && (ec == std::errc{} || ec == std::errc::result_out_of_range);
  if (!number || (ec == std::errc{} && value < 1)) {
    bad_tasks(whole, "'" + clipped(text) +
                         "' is not a task count (expected a list such as 4,2,1(x2), every count at "
                         "least 1)");
  }
  if (ec == std::errc::result_out_of_range || value > max) bad_tasks(whole, "'" + clipped(text) + "' " + what);
  return value;
}

}  // namespace

std::vector<int> expand_tasks_per_node(std::string_view text) {
  struct Run {
    std::int64_t count, repeat;
  };
  std::vector<Run> runs;
  std::int64_t nodes = 0, tasks = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    std::int64_t repeat = 1;
    if (const auto paren = item.find("(x"); paren != std::string_view::npos) {
      if (item.back() != ')') parse_count(item, text, 0, "");  // throws with the message
      repeat = parse_count(
          item.substr(paren + 2, item.size() - paren - 3), text, kMaxStepTasks,
          "repeats a count more often than the " + std::to_string(kMaxStepTasks) + " nodes a step may have");
      item = item.substr(0, paren);
    }
    const std::int64_t count =
        parse_count(item, text, kMaxTasksPerNode,
                    "tasks on one node are more than Slurm runs (at most " + std::to_string(kMaxTasksPerNode) + ")");
    // Both factors are bounded above, so neither sum nor product can overflow 64 bits.
    nodes += repeat;
    if (nodes > kMaxStepTasks) {
      bad_tasks(text, "the counts cover " + std::to_string(nodes) + " nodes, more than the " +
                          std::to_string(kMaxStepTasks) + " a step may have");
    }
    tasks += count * repeat;
    if (tasks > kMaxStepTasks) {
      bad_tasks(text, "the counts add up to " + std::to_string(tasks) + " tasks, more than the " +
                          std::to_string(kMaxStepTasks) + " a step may have");
    }
    runs.push_back({count, repeat});
    start = end + 1;
  }
  std::vector<int> counts;
  counts.reserve(static_cast<std::size_t>(nodes));
  for (const Run& run : runs)
    counts.insert(counts.end(), static_cast<std::size_t>(run.repeat), static_cast<int>(run.count));
  return counts;
}

StepShape step_shape(std::string_view nodelist, std::string_view tasks_per_node) {
  StepShape shape;
  // Measured first: the hostlist caps allow millions of names, a step has at most kMaxStepTasks nodes.
  HostlistSize size;
  try {
    size = measure_hostlist(nodelist);
  } catch (const UsageError& e) {
    throw UsageError(std::string(kNodelistVar) + ": " + e.what());
  }
  if (size.hosts > static_cast<std::size_t>(kMaxStepTasks)) {
    throw UsageError(shown_value(kNodelistVar, nodelist) + ": " + std::to_string(size.hosts) +
                     " nodes, more than the " + std::to_string(kMaxStepTasks) + " a step may have; " + kSetBySlurm);
  }
  shape.nodes = expand_hostlist(nodelist);
  shape.tasks_per_node = expand_tasks_per_node(tasks_per_node);
  if (shape.nodes.empty() || shape.nodes.size() != shape.tasks_per_node.size()) {
    throw UsageError("the step's node list " + shown_value(kNodelistVar, nodelist) + " (" +
                     std::to_string(shape.nodes.size()) + " nodes) does not match its tasks per node " +
                     shown_value(kTasksVar, tasks_per_node) + " (" + std::to_string(shape.tasks_per_node.size()) +
                     " entries); " + kSetBySlurm);
  }
  return shape;
}

ParallelLayout resolve_layout(const std::optional<LayoutRequest>& request, std::int64_t world_size,
                              std::string_view source) {
  if (world_size < 1 || world_size > kMaxStepTasks) {
    throw UsageError("the step has " + std::to_string(world_size) + " tasks; tenax places steps of 1 to " +
                     std::to_string(kMaxStepTasks) + " tasks: launch fewer tasks");
  }
  const LayoutRequest wanted = request.value_or(LayoutRequest{});
  // parse_layout bounds the degrees; a request built otherwise must not divide by zero either.
  if (wanted.tp < 1 || wanted.pp < 1 || wanted.dp < 0) {
    throw UsageError(std::string(source) + "=" + layout_to_string(wanted.tp, wanted.pp, wanted.dp) +
                     ": every degree must be at least 1");
  }
  ParallelLayout layout;
  layout.tp = wanted.tp;
  layout.pp = wanted.pp;
  // 64 bits: tp*pp of two ints cannot overflow them (tp=65536,pp=65536 once wrapped to 0 in int and divided by it).
  const std::int64_t model = std::int64_t{wanted.tp} * wanted.pp;
  if (wanted.dp == 0) {
    if (world_size % model != 0) {
      throw UsageError(std::string(source) + ": tp*pp = " + std::to_string(model) + " does not divide the step's " +
                       std::to_string(world_size) + " tasks; " +
                       (model > world_size
                            ? "lower tp or pp"
                            : "launch a multiple of " + std::to_string(model) + " tasks or change tp/pp"));
    }
    layout.dp = static_cast<int>(world_size / model);
  } else {
    layout.dp = wanted.dp;
    std::int64_t product = 0;
    const bool fits = !__builtin_mul_overflow(model, std::int64_t{wanted.dp}, &product);
    if (!fits || product != world_size) {
      throw UsageError(std::string(source) + "=" + layout_to_string(layout.tp, layout.pp, layout.dp) +
                       ": tp*pp*dp = " + (fits ? std::to_string(product) : "more than 2^63") + " but the step has " +
                       std::to_string(world_size) + " tasks; launch that many tasks, or leave dp out to infer it");
    }
  }
  return layout;
}

void check_step_items(const StepShape& shape, const SlurmStepItems& items) {
  const bool agree = items.total_tasks == static_cast<std::uint64_t>(shape.total_tasks()) &&
                     items.node_index < shape.nodes.size() &&
                     items.local_tasks == static_cast<std::uint64_t>(shape.tasks_per_node[items.node_index]);
  if (!agree) {
    throw Error("the step's SLURM_STEP_NODELIST/SLURM_STEP_TASKS_PER_NODE (" + std::to_string(shape.nodes.size()) +
                " nodes, " + std::to_string(shape.total_tasks()) + " tasks) disagree with Slurm's task counts (" +
                std::to_string(items.total_tasks) + " tasks, node " + std::to_string(items.node_index) + " with " +
                std::to_string(items.local_tasks) + "); " + kSetBySlurm);
  }
}

void check_step_request(const JobSettings& settings, std::uint64_t tasks, std::uint64_t nodes) {
  if (tasks < 1 || tasks > static_cast<std::uint64_t>(kMaxStepTasks)) {
    throw UsageError("the step has " + std::to_string(tasks) + " tasks; tenax places steps of 1 to " +
                     std::to_string(kMaxStepTasks) + " tasks: launch fewer tasks");
  }
  resolve_layout(settings.layout, static_cast<std::int64_t>(tasks), settings.layout_source);
  if (settings.placement != PlacementPolicy::None && nodes > 0 && tasks % nodes != 0) {
    throw UsageError("--tenax-placement=" + std::string(to_string(settings.placement)) +
                     " needs the same number of tasks on every node, but " + std::to_string(tasks) +
                     " tasks cannot be spread evenly over " + std::to_string(nodes) +
                     " nodes; use --ntasks-per-node=N (one task per GPU), or --tenax-placement=none");
  }
}

std::optional<Placement> place_step(const StepShape& shape, const ParallelLayout& layout, PlacementPolicy policy,
                                    const SwitchTree& tree) {
  if (policy == PlacementPolicy::None) return std::nullopt;
  const int per_node = shape.tasks_per_node.front();
  for (std::size_t i = 0; i < shape.nodes.size(); ++i) {
    if (shape.tasks_per_node[i] != per_node) {
      std::string counts;
      for (int c : shape.tasks_per_node) {
        if (counts.size() > 200) {
          counts += ",...";
          break;
        }
        counts += (counts.empty() ? "" : ",") + std::to_string(c);
      }
      throw UsageError("--tenax-placement=" + std::string(to_string(policy)) +
                       " needs the same number of tasks on every node, but this step has " + counts +
                       " tasks on its nodes; use --ntasks-per-node=N (one task per GPU), or --tenax-placement=none");
    }
  }
  if (policy == PlacementPolicy::Block) return block_placement(shape.nodes, per_node, layout);
  return place_ranks(shape.nodes, tree, per_node, layout);
}

std::string placement_log_text(PlacementPolicy policy, const Placement* placement) {
  const std::string name(to_string(policy));
  if (policy != PlacementPolicy::Topology || placement == nullptr) return name;
  if (placement->strategy == "block") return name + " (arrangement block: no other order was cheaper)";
  return name + " (arrangement " + placement->strategy + ")";
}

}  // namespace tenax::spank
