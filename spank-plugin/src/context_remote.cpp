// Remote context (slurmstepd on each node): the job's settings, the step's placement, each task's environment.
//
// user_init runs once per step and node, after slurmstepd has dropped to the user's identity: it resolves the
// settings, computes the whole step's placement (every node computes the same map), finds the node's GPUs and NUMA
// nodes (hwloc) and exports the job-wide variables. task_init runs in each task's process just before exec, as the
// user: it exports the task's rank and binds what Slurm left unbound (slurm_binding.hpp). There is deliberately no
// task_init_privileged: nothing here needs root, and a privileged callback must never touch user-controlled paths.
#include <pwd.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "contexts.hpp"
#include "plugin_state.hpp"
#include "step_ranks.hpp"
#include "tenax/error.hpp"
#include "topology_source.hpp"

namespace tenax::spank::remote {

namespace {

// Slurm's step ids for the batch script and the external (adopted processes) step, from slurm/slurm.h: neither runs
// the training tasks, so they get the job-wide settings only, no rank.
constexpr std::uint32_t kBatchStep = 0xfffffffb;
constexpr std::uint32_t kExternStep = 0xfffffffc;
constexpr std::uint32_t kInteractiveStep = 0xfffffffa;

std::string user_name(uid_t uid) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) return entry.pw_name;
  return std::to_string(uid);  // an unnamed uid still gives a usable, unique directory name
}

SwitchTree load_tree(const AdminConfig& admin) {
  // slurm.conf's path from slurmstepd's own environment (inherited from slurmd), never the job's: the topology must
  // come from the site, not from a variable the user controls.
  const char* conf = std::getenv("SLURM_CONF");
  std::string note;
  SwitchTree tree = load_switch_tree(admin, conf ? conf : "/etc/slurm/slurm.conf", &note);
  if (!note.empty()) log_info(note);
  return tree;
}

std::string require_env(spank_t sp, const char* name) {
  auto value = job_getenv(sp, name);
  if (!value) throw Error(std::string(name) + " is not set in the step's environment");
  return *value;
}

// Resolves the settings, exports the job-wide variables and, for a task step, computes the step's plan.
void plan_step(spank_t sp, PluginState& s) {
  const JobRequest environment =
      request_from_environment([sp](const char* name) { return job_getenv(sp, name); }, s.admin);
  s.settings = resolve_settings(s.options, environment, s.admin);

  const auto job_id = item_u32(sp, S_JOB_ID, "S_JOB_ID");
  const auto step_id = item_u32(sp, S_JOB_STEPID, "S_JOB_STEPID");
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) throw Error("spank_get_item(S_JOB_UID) failed");

  // Job-wide settings: the batch script and every step see the same values.
  if (!s.settings.ckpt_dir.empty()) {
    job_setenv(sp, kEnvCkptDir,
               expand_dir_pattern("checkpoint directory", s.settings.ckpt_dir, user_name(uid), std::to_string(job_id)));
  }
  if (!s.settings.data_stage_dir.empty()) {
    job_setenv(
        sp, kEnvDataStageDir,
        expand_dir_pattern("data stage directory", s.settings.data_stage_dir, user_name(uid), std::to_string(job_id)));
  }
  if (s.settings.ckpt_local_dir == kNoLocalDir) {
    job_setenv(sp, kEnvCkptLocalDir, "");  // the job turned the site's tier off: no node-local copies
  } else if (!s.settings.ckpt_local_dir.empty()) {
    // %n stays: each rank expands it to its own node's name.
    job_setenv(sp, kEnvCkptLocalDir,
               expand_dir_pattern("node-local checkpoint directory", s.settings.ckpt_local_dir, user_name(uid),
                                  std::to_string(job_id)));
  }
  // The programs' interval defaults (CheckpointPolicy::every_default); unset, each program keeps its own.
  if (!s.settings.ckpt_every.empty()) job_setenv(sp, kEnvCkptEvery, s.settings.ckpt_every);
  if (!s.settings.ckpt_local_every.empty()) job_setenv(sp, kEnvCkptLocalEvery, s.settings.ckpt_local_every);
  job_setenv(sp, kEnvPlacement, std::string(to_string(s.settings.placement)));
  job_setenv(sp, kEnvMaxRestarts, std::to_string(s.settings.max_restarts));
  job_setenv(sp, kEnvSiteMaxRestarts, std::to_string(s.admin.max_restarts));
  job_setenv(sp, kEnvSiteMaxSpares, std::to_string(s.admin.max_spares));
  if (s.admin.node_mtbf_hours > 0)
    job_setenv(sp, kEnvNodeMtbf, std::to_string(s.admin.node_mtbf_hours) + "h", /*overwrite=*/false);
  job_setenv(sp, kEnvSpares, std::to_string(s.settings.spares));
  // Slurm leaves SLURM_RESTART_COUNT unset on a job's first run; tenax's runtime always finds it.
  const auto restarts = item_u32(sp, S_SLURM_RESTART_COUNT, "S_SLURM_RESTART_COUNT");
  job_setenv(sp, "SLURM_RESTART_COUNT", std::to_string(restarts), /*overwrite=*/false);

  if (step_id == kBatchStep || step_id == kExternStep || step_id == kInteractiveStep) return;

  StepPlan plan;
  // The job's environment is the user's: step_shape bounds both variables, and Slurm's own counts must agree with them.
  const StepShape shape =
      step_shape(require_env(sp, "SLURM_STEP_NODELIST"), require_env(sp, "SLURM_STEP_TASKS_PER_NODE"));
  SlurmStepItems items;
  items.total_tasks = item_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT");
  items.node_index = item_u32(sp, S_JOB_NODEID, "S_JOB_NODEID");
  items.local_tasks = item_u32(sp, S_JOB_LOCAL_TASK_COUNT, "S_JOB_LOCAL_TASK_COUNT");
  try {
    check_step_items(shape, items);
  } catch (const Error&) {
    // A step over several components of a heterogeneous job (srun ... : ...): Slurm counts each component apart, the
    // step's node list spans them all. Its ranks would be numbered per component: not one tenax run.
    // SLURM_HET_SIZE is also in a one-component step's environment (inherited from the batch script): only a step
    // whose node list holds more tasks than Slurm counts for it spans components.
    const std::optional<std::string> components = job_getenv(sp, "SLURM_HET_SIZE");
    if (components && !components->empty() && *components != "1" &&
        static_cast<std::uint64_t>(shape.total_tasks()) > items.total_tasks)
      throw UsageError(
          "this step spans several components of a heterogeneous job (srun ... : ..., or --het-group with more than "
          "one component), which tenax cannot place as one run: run the tenax step in one component (srun "
          "--het-group=N), or submit one job of the nodes and tasks it needs");
    throw;
  }
  check_step_request(s.settings, items.total_tasks, shape.nodes.size());
  const std::int64_t total = shape.total_tasks();  // at most kMaxStepTasks, like every count below
  plan.node_index = static_cast<int>(items.node_index);
  plan.local_tasks = static_cast<int>(items.local_tasks);
  plan.layout = resolve_layout(s.settings.layout, total, s.settings.layout_source);
  const SwitchTree tree = s.settings.placement == PlacementPolicy::Topology ? load_tree(s.admin) : SwitchTree{};
  plan.placement = place_step(shape, plan.layout, s.settings.placement, tree);
  if (s.admin.bind_gpus || s.admin.bind_numa) {
    // A node whose topology cannot be read still runs the job, unbound; the reason goes to slurmd's log.
    try {
      plan.hardware = load_hardware(s.admin.hw_topology);
    } catch (const std::exception& e) {
      plan.hardware_error = e.what();
      report_error("node " + std::to_string(plan.node_index) + ": " + plan.hardware_error + "; tasks are not bound");
    }
  }
  plan.requested_cpu_bind_type = job_getenv(sp, "SLURM_CPU_BIND_TYPE");

  job_setenv(sp, kEnvWorldSize, std::to_string(total));
  job_setenv(sp, kEnvLayout, layout_to_string(plan.layout.tp, plan.layout.pp, plan.layout.dp));
  if (plan.node_index == 0) {
    log_info("job " + std::to_string(job_id) + "." + std::to_string(step_id) + ": " + std::to_string(total) +
             " ranks, layout " + layout_to_string(plan.layout.tp, plan.layout.pp, plan.layout.dp) + ", placement " +
             placement_log_text(s.settings.placement, plan.placement ? &*plan.placement : nullptr));
  }
  if (plan.placement) {
    for (const auto& node : plan.placement->nodes_without_topology) {
      if (!tree.empty()) log_info("node " + node + " is not in the topology file: placed as if far from all others");
    }
  }
  s.step = std::move(plan);
}

// Exports one task's rank and binds it to its GPU(s) and NUMA node.
void set_up_task(spank_t sp, const StepPlan& plan, const AdminConfig& admin) {
  const int local_id = item_int(sp, S_TASK_ID, "S_TASK_ID");
  const auto global_id = static_cast<int>(item_u32(sp, S_TASK_GLOBAL_ID, "S_TASK_GLOBAL_ID"));
  const int rank = plan.placement ? plan.placement->rank_at(plan.node_index, local_id) : global_id;
  if (rank < 0) {
    throw Error("no rank placed on node " + std::to_string(plan.node_index) + " slot " + std::to_string(local_id));
  }
  job_setenv(sp, "TENAX_RANK", std::to_string(rank));
  job_setenv(sp, "TENAX_LOCAL_RANK", std::to_string(local_id));

  // What Slurm bound already (the site's defaults or the step's options) is left to Slurm.
  const SlurmBinding slurm =
      slurm_binding([sp](const char* name) { return job_getenv(sp, name); }, plan.requested_cpu_bind_type);
  const bool topology = plan.hardware_error.empty();
  BindingRequest request;
  request.slot = local_id;
  request.tasks = plan.local_tasks;
  request.visible_devices = job_getenv(sp, "CUDA_VISIBLE_DEVICES");
  request.slurm_gpus = job_getenv(sp, "SLURM_STEP_GPUS");
  if (!request.slurm_gpus) request.slurm_gpus = job_getenv(sp, "SLURM_JOB_GPUS");
  request.device_order = job_getenv(sp, "CUDA_DEVICE_ORDER");
  request.bind_gpus = topology && admin.bind_gpus && slurm.gpus.kind == BindingOwner::Plugin;
  request.bind_numa = topology && admin.bind_numa && slurm.cpus.kind == BindingOwner::Plugin;
  request.gpus_bound_by_slurm = slurm.gpus.kind == BindingOwner::Slurm;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (request.bind_numa && sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) request.allowed_cpus.push_back(cpu);
    }
  }
  const TaskBinding binding = plan_binding(plan.hardware, request);
  if (binding.cuda_visible_devices) {
    // Indices follow the PCI bus order (nvidia-smi's); CUDA's default order may differ on mixed-GPU nodes.
    job_setenv(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/false);
    job_setenv(sp, "CUDA_VISIBLE_DEVICES", *binding.cuda_visible_devices);
  }
  if (!binding.cpus.empty()) {
    cpu_set_t wanted;
    CPU_ZERO(&wanted);
    for (int cpu : binding.cpus) {
      if (cpu < CPU_SETSIZE) CPU_SET(cpu, &wanted);
    }
    // A failed binding costs speed, not correctness: report it and let the task run.
    if (sched_setaffinity(0, sizeof(wanted), &wanted) != 0) {
      report_error("rank " + std::to_string(rank) + ": could not bind to CPUs " + format_cpulist(binding.cpus));
    }
  }
  std::string summary = topology ? binding.summary : "topology not loaded: nothing bound";
  for (const BindingOwner* owner : {&slurm.gpus, &slurm.cpus}) {
    if (owner->kind != BindingOwner::Plugin) summary += "; " + owner->reason;
  }
  log_debug("rank " + std::to_string(rank) + " (node " + std::to_string(plan.node_index) + ", local " +
            std::to_string(local_id) + "): " + summary);
}

}  // namespace

int user_init(spank_t sp) {
  PluginState& s = state();
  if (!s.options.enabled) return 0;
  try {
    plan_step(sp, s);
  } catch (const UsageError& e) {
    s.step_error = e.what();
  } catch (const std::exception& e) {
    s.step_error = std::string("user_init: ") + e.what();
  }
  return 0;
}

int task_init(spank_t sp) {
  PluginState& s = state();
  if (!s.options.enabled) return 0;
  // Reported here so that the step fails (see PluginState::step_error); every task fails, the first of each node
  // says why.
  if (!s.step_error.empty()) {
    if (item_int(sp, S_TASK_ID, "S_TASK_ID") == 0) throw UsageError(s.step_error);
    return -1;
  }
  if (s.step) set_up_task(sp, *s.step, s.admin);
  return 0;
}

}  // namespace tenax::spank::remote
