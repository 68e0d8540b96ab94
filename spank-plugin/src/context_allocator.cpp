// Allocator context (sbatch, salloc): the last moment to refuse before a job is queued.
//
// Options were validated by their callbacks already; here the environment layer is (TENAX_CHECKPOINT_DIR and friends
// exported by the user), so that a bad variable fails at submission too instead of inside the job. The job's task
// count is not known to SPANK here: the layout is checked against it by srun and slurmstepd.
#include <cstdlib>

#include "contexts.hpp"
#include "plugin_state.hpp"
#include "tenax/error.hpp"

namespace tenax::spank::allocator {

namespace {

// The job epilog removes the job's node-local checkpoint copies; it sees neither the options' callbacks nor the
// user's environment, only this "job control" environment (as SPANK_TENAX_CKPT_LOCAL_DIR) and the site default. Passed
// whenever the job names a directory, also equal to today's site default (the admin may change it before the job
// ends). Inside an existing allocation (srun in a batch script) Slurm ignores it: the job exists already.
void pass_local_dir_to_epilog(spank_t sp, const std::string& local_dir) {
  if (local_dir.empty()) return;
  const spank_err_t rc = spank_job_control_setenv(sp, kEnvCkptLocalDir, local_dir.c_str(), 1);
  if (rc != ESPANK_SUCCESS) {
    log_debug(std::string("could not pass the node-local checkpoint directory to the job epilog: ") +
              spank_strerror(rc));
  }
}

}  // namespace

int init_post_opt(spank_t sp) {
  PluginState& s = state();
  if (!s.options.enabled) {
    // A job without --tenax that exports TENAX_CKPT_LOCAL_DIR for tenax-launch and its ranks still gets its copies
    // removed at its end. Nothing else of tenax applies to it, so a value that is not a valid pattern is left alone
    // here (the runtime reports it) instead of refusing the job.
    if (const char* value = std::getenv(kEnvCkptLocalDir)) {
      try {
        pass_local_dir_to_epilog(sp, parse_ckpt_local_dir(kEnvCkptLocalDir, value));
      } catch (const UsageError&) {
      }
    }
    return 0;
  }
  const JobRequest environment = request_from_environment(
      [](const char* name) -> std::optional<std::string> {
        const char* value = std::getenv(name);
        return value ? std::optional<std::string>(value) : std::nullopt;
      },
      s.admin);
  s.settings = resolve_settings(s.options, environment, s.admin);
  pass_local_dir_to_epilog(sp, s.settings.ckpt_local_dir);
  return 0;
}

}  // namespace tenax::spank::allocator
