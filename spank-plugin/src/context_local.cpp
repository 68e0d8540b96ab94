// Local context (srun): validates before any task starts, so a step that cannot be placed fails at the prompt.
//
// init_post_opt is the allocator context's (the environment layer is checked as sbatch does). local_user_init runs once
// the step exists: the task and node counts are known, so the layout is checked against them, and an uneven task
// distribution (which placement cannot serve) is refused when the counts alone prove it.

#include "contexts.hpp"
#include "plugin_state.hpp"
#include "step_ranks.hpp"

namespace tenax::spank::local {

int user_init(spank_t sp) {
  PluginState& s = state();
  if (!s.options.enabled) return 0;
  check_step_request(s.settings, item_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT"),
                     item_u32(sp, S_JOB_NNODES, "S_JOB_NNODES"));
  return 0;
}

}  // namespace tenax::spank::local
