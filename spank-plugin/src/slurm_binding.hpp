// Whether Slurm already bound the task, read from the variables Slurm puts in each task's environment: the plugin
// binds only what Slurm (the site's defaults or the user's srun options) left unbound.
//
// CPUs. slurmstepd writes SLURM_CPU_BIND, SLURM_CPU_BIND_TYPE, SLURM_CPU_BIND_LIST and SLURM_CPU_BIND_VERBOSE into
// every task's environment from the step's cpu_bind_type (src/common/env.c setup_env, called from
// src/slurmd/slurmstepd/task.c exec_task before the SPANK task_init). That type is srun's --cpu-bind (or
// SLURM_CPU_BIND, and --ntasks-per-core/socket: src/srun/libsrun/opt.c), else the default slurmctld gives the step
// from the nodes' or partition's CpuBind or TaskPluginParam (src/slurmctld/step_mgr.c _set_def_cpu_bind); task/affinity
// then adds its automatic binding (src/plugins/task/affinity/dist_tasks.c lllp_distribution). SLURM_CPU_BIND_TYPE is
// "<unit>,<mode>" with unit threads|cores|sockets|ldoms and mode none|rank|map_cpu:|mask_cpu:|rank_ldom|map_ldom:|
// mask_ldom:, either part possibly absent. A bare "mask_cpu:" is also what task/affinity writes when it only confines
// the tasks to the step's CPUs ("auto binding off", and --cpu-bind=none on a partly allocated node): it counts as
// Slurm's binding only when srun itself asked for one, which srun's own SLURM_CPU_BIND_TYPE in the step's environment
// says (src/srun/srun.c writes it with setup_env into the environment the tasks inherit; slurmstepd rewrites it for
// each task). A site default of none on a partly allocated node therefore looks like no binding: bind_numa=no is the
// site's way to turn the plugin's binding off.
//
// GPUs. slurmstepd writes SLURMD_TRES_BIND, the step's tres_bind, into each task's environment (task.c) and sets the
// task's own CUDA_VISIBLE_DEVICES from it (gres_g_task_set_env, just before task_init). srun fills tres_bind from
// --gpu-bind ("gpu:<value>", src/common/slurm_opt.c), and implicitly from --gpus-per-task ("gpu:per_task:<n>") and
// --ntasks-per-gpu ("gpu:single:<n>") (src/srun/libsrun/launch.c). sbatch and salloc export SLURM_GPU_BIND and
// SLURM_GPUS_PER_TASK for the srun inside the job (src/common/env.c set_env_from_opts); without SLURMD_TRES_BIND they
// are read as the same request.
//
// "none" (--cpu-bind=none, --gpu-bind=none) is the user asking for no binding: the plugin binds nothing of that kind.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace tenax::spank {

using EnvLookup = std::function<std::optional<std::string>(const char*)>;

struct BindingOwner {
  enum Kind { Plugin, Slurm, Unbound };  // Unbound: Slurm was told "none"
  Kind kind = Plugin;
  std::string reason;  // for the log when not Plugin, e.g. "cpus: left to Slurm's --cpu-bind=cores"
};

struct SlurmBinding {
  BindingOwner cpus;
  BindingOwner gpus;
};

// task_env: the task's environment at task_init. requested_cpu_bind_type: SLURM_CPU_BIND_TYPE in the step's
// environment before slurmstepd rewrote it for the task (user_init), i.e. what srun asked for.
SlurmBinding slurm_binding(const EnvLookup& task_env, const std::optional<std::string>& requested_cpu_bind_type);

}  // namespace tenax::spank
