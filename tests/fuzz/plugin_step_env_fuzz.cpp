// What slurmstepd's part of the SPANK plugin reads from the job's environment (the user's): line 1 is
// SLURM_STEP_NODELIST, line 2 SLURM_STEP_TASKS_PER_NODE, further lines NAME=VALUE variables (TENAX_LAYOUT,
// TENAX_PLACEMENT, ...). Runs the path of plan_step: settings, step shape, Slurm's counts, layout, placement.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_config.hpp"
#include "input_limits.hpp"
#include "job_settings.hpp"
#include "step_ranks.hpp"
#include "tenax/error.hpp"

namespace {

std::vector<std::string> lines_of(std::string_view input) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= input.size()) {
    std::size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    lines.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tenax::spank;
  const std::vector<std::string> lines = lines_of(std::string_view(reinterpret_cast<const char*>(data), size));
  if (lines.size() < 2) return 0;
  std::map<std::string, std::string> env;
  for (std::size_t i = 2; i < lines.size(); ++i) {
    const auto eq = lines[i].find('=');
    if (eq != std::string::npos) env[lines[i].substr(0, eq)] = lines[i].substr(eq + 1);
  }
  static const AdminConfig admin = AdminConfig::parse({});
  try {
    const JobRequest from_env = request_from_environment(
        [&](const char* name) -> std::optional<std::string> {
          const auto it = env.find(name);
          return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
        },
        admin);
    const JobSettings settings = resolve_settings(JobRequest{}, from_env, admin);
    const StepShape shape = step_shape(lines[0], lines[1]);
    const std::int64_t total = shape.total_tasks();
    if (shape.nodes.empty() || total < 1 || total > kMaxStepTasks) __builtin_trap();
    // Slurm's own counts, agreeing with the environment: must be accepted (an Error escaping here is a bug).
    check_step_items(shape, {static_cast<std::uint64_t>(total), shape.nodes.size() - 1,
                             static_cast<std::uint64_t>(shape.tasks_per_node.back())});
    const tenax::ParallelLayout layout = resolve_layout(settings.layout, total, settings.layout_source);
    if (std::int64_t{layout.tp} * layout.pp * layout.dp != total) __builtin_trap();
    check_step_request(settings, static_cast<std::uint64_t>(total), shape.nodes.size());
    // Placement is not a parser: run it on small steps only, so that the fuzzer's time goes to the parsing above.
    if (total <= 512) {
      const auto placement = place_step(shape, layout, settings.placement, tenax::SwitchTree{});
      if (placement && placement->slot_of_rank.size() != static_cast<std::size_t>(total)) __builtin_trap();
    }
  } catch (const tenax::UsageError&) {
    // refused with a message naming the variable: the plugin's own answer
  }
  return 0;
}
