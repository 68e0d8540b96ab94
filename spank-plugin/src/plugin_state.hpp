// The plugin's state in one process (sbatch, srun or one slurmstepd).
//
// SPANK gives option callbacks no handle, so the values they parse must live somewhere global; keeping all of it in
// this one struct (and nothing in file-level globals) shows at a glance what survives between callbacks. slurmstepd
// forks each task from the process that ran user_init, so the per-step plan is visible to every task_init.
#pragma once

#include <optional>
#include <string>

#include "admin_config.hpp"
#include "binding.hpp"
#include "job_request.hpp"
#include "job_settings.hpp"
#include "slurm_binding.hpp"
#include "spank_api.hpp"
#include "tenax/placement.hpp"

namespace tenax::spank {

struct StepPlan {
  std::optional<Placement> placement;  // unset with placement=none: ranks are Slurm's task ids
  ParallelLayout layout;
  int node_index = 0;   // this node's index in the step's node list
  int local_tasks = 0;  // the step's tasks on this node
  NodeHardware hardware;
  std::string hardware_error;  // why the topology could not be loaded ("": loaded, or binding off): nothing is bound
  // SLURM_CPU_BIND_TYPE as srun exported it (the step's environment before slurmstepd rewrites it for each task).
  std::optional<std::string> requested_cpu_bind_type;
};

struct PluginState {
  AdminConfig admin;
  JobRequest options;            // from the command line (in the job: propagated by Slurm as SLURM_SPANK_*)
  JobSettings settings;          // resolved in init_post_opt / user_init
  std::optional<StepPlan> step;  // slurmstepd of a task step with tenax enabled, after user_init
  // Why the step could not be planned. Reported by task_init rather than user_init: Slurm 22.05's srun exits 0 when
  // user_init fails (the launch failure is not counted as the step's failure), while a failed task_init fails the task.
  std::string step_error;
  // A plugstack.conf the plugin refused, in the job epilog: reported there instead of failing init, which would fail
  // the epilog and drain every node at every job's end (everywhere else the refusal fails the command at once).
  std::string admin_error;
};

PluginState& state();

// Registers the option table with Slurm (slurm_spank_init, in every context that parses options).
void register_options(spank_t sp);

}  // namespace tenax::spank
