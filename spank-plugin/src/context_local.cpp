// Local context (srun): validates before any task starts, so a step that cannot be placed fails at the prompt.
//
// init_post_opt is the allocator context's (the environment layer is checked as sbatch does). local_user_init runs once
// the step exists: the task and node counts are known, so the layout is checked against them, and an uneven task
// distribution (which placement cannot serve) is refused when the counts alone prove it.

#include "contexts.hpp"
#include "plugin_state.hpp"
#include "step_ranks.hpp"
#include "tenax/error.hpp"

namespace tenax::spank::local {

int user_init(spank_t sp) {
  PluginState& s = state();
  if (!s.options.enabled) return 0;
  const auto tasks = static_cast<int>(item_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT"));
  const auto nodes = static_cast<int>(item_u32(sp, S_JOB_NNODES, "S_JOB_NNODES"));
  resolve_layout(s.settings.layout, tasks, s.settings.layout_source);
  if (s.settings.placement != PlacementPolicy::None && nodes > 0 && tasks % nodes != 0) {
    throw UsageError("--tenax-placement=" + std::string(to_string(s.settings.placement)) +
                     " needs the same number of tasks on every node, but " + std::to_string(tasks) +
                     " tasks cannot be spread evenly over " + std::to_string(nodes) +
                     " nodes; use --ntasks-per-node=N (one task per GPU), or --tenax-placement=none");
  }
  return 0;
}

}  // namespace tenax::spank::local
