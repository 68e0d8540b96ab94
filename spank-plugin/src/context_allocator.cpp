// Allocator context (sbatch, salloc): the last moment to refuse before a job is queued.
//
// Options were validated by their callbacks already; here the environment layer is (TENAX_CHECKPOINT_DIR and friends
// exported by the user), so that a bad variable fails at submission too instead of inside the job. The job's task
// count is not known to SPANK here: the layout is checked against it by srun and slurmstepd.
#include <cstdlib>

#include "contexts.hpp"
#include "plugin_state.hpp"

namespace tenax::spank::allocator {

int init_post_opt(spank_t /*sp*/) {
  PluginState& s = state();
  if (!s.options.enabled) return 0;
  const JobRequest environment = request_from_environment(
      [](const char* name) -> std::optional<std::string> {
        const char* value = std::getenv(name);
        return value ? std::optional<std::string>(value) : std::nullopt;
      },
      s.admin);
  s.settings = resolve_settings(s.options, environment, s.admin);
  return 0;
}

}  // namespace tenax::spank::allocator
