#include "attempt_plan.hpp"

#include <cstdlib>

#include <algorithm>
#include <string_view>

#include "core/directory_lock.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

AttemptPlan plan_local_attempt(const Options& options) {
  AttemptPlan plan;
  plan.world_size = options.ranks;
  return plan;
}

AttemptPlan plan_slurm_attempt(const Options& options, const std::vector<std::string>& allocation,
                               const std::set<std::string>& excluded) {
  const int allocated = static_cast<int>(allocation.size());
  if (allocated == 0) throw UsageError("the Slurm allocation lists no nodes (SLURM_JOB_NODELIST is empty)");
  if (options.spare_nodes >= allocated) {
    throw UsageError("--spare-nodes (" + std::to_string(options.spare_nodes) + ") leaves none of the " +
                     std::to_string(allocated) + " allocated nodes to run on");
  }
  const int wanted = options.nodes ? options.nodes : allocated - options.spare_nodes;
  if (wanted + options.spare_nodes > allocated) {
    throw UsageError("--nodes (" + std::to_string(wanted) + ") + --spare-nodes (" +
                     std::to_string(options.spare_nodes) + ") exceeds the " + std::to_string(allocated) +
                     " nodes of the allocation");
  }
  int tasks_per_node = options.tasks_per_node;
  if (tasks_per_node == 0 && options.ranks != 0) {
    if (options.ranks % wanted != 0) {
      throw UsageError("--ranks (" + std::to_string(options.ranks) + ") is not a multiple of the " +
                       std::to_string(wanted) + " nodes per attempt: give --tasks-per-node or change --ranks");
    }
    tasks_per_node = options.ranks / wanted;
  }
  if (tasks_per_node == 0) tasks_per_node = 1;
  const int world = options.ranks ? options.ranks : wanted * tasks_per_node;
  if (world != wanted * tasks_per_node) {
    throw UsageError("--ranks (" + std::to_string(world) + ") != --nodes (" + std::to_string(wanted) +
                     ") x --tasks-per-node (" + std::to_string(tasks_per_node) + ")");
  }

  AttemptPlan plan;
  plan.tasks_per_node = tasks_per_node;
  std::vector<std::string> healthy;
  for (const auto& node : allocation) {
    if (excluded.count(node)) {
      plan.exclude.push_back(node);
    } else {
      healthy.push_back(node);
    }
  }
  std::sort(plan.exclude.begin(), plan.exclude.end());
  const int available = static_cast<int>(healthy.size());
  if (available >= wanted) {
    plan.nodes = wanted;
    plan.world_size = world;
    return plan;
  }
  const std::string shortage = "only " + std::to_string(available) + " of the " + std::to_string(allocated) +
                               " allocated nodes are healthy (excluded: " + join(plan.exclude, ",") + "), " +
                               std::to_string(wanted) + " are needed";
  if (!options.elastic) {
    throw Error(shortage +
                ": allocate spares (--spare-nodes), allow --elastic, or remove nodes that were repaired "
                "from the run directory's bad-nodes.txt");
  }
  if (available < options.min_nodes) {
    throw Error(shortage + " and --min-nodes is " + std::to_string(options.min_nodes));
  }
  const int shrunk = available * tasks_per_node / options.model_parallel * options.model_parallel;
  if (shrunk == 0) {
    throw Error(shortage + ": " + std::to_string(available * tasks_per_node) +
                " ranks cannot hold one replica of --model-parallel " + std::to_string(options.model_parallel));
  }
  plan.nodes = available;
  plan.world_size = shrunk;
  plan.original_world_size = world;
  return plan;
}

std::vector<std::pair<std::string, std::string>> protocol_env(const Options& options, const AttemptPlan& plan,
                                                              const std::string& run_dir,
                                                              const std::string& checkpoint_dir) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"TENAX_RUN_DIR", run_dir},
      {"TENAX_ATTEMPT", std::to_string(plan.attempt)},
      {"TENAX_RESTART_COUNT", std::to_string(plan.restart_count)},
      {"TENAX_HEARTBEAT_INTERVAL", std::to_string(options.heartbeat_interval.count()) + "ms"},
      // This launcher holds the checkpoint directory's lock for the run: the program's checkpointer works under it.
      {"TENAX_LAUNCHER", lock_holder_identity()},
  };
  if (!checkpoint_dir.empty()) env.emplace_back("TENAX_CHECKPOINT_DIR", checkpoint_dir);
  if (!plan.job_id.empty()) env.emplace_back("TENAX_JOB_ID", plan.job_id);
  if (plan.original_world_size != 0) {
    env.emplace_back("TENAX_ORIGINAL_WORLD_SIZE", std::to_string(plan.original_world_size));
  }
  // Never 0 ms: 0 means "no failure yet" to the program.
  auto milliseconds = [](double s) {
    return std::to_string(std::max<long long>(1, static_cast<long long>(s * 1000.0))) + "ms";
  };
  if (plan.observed_mtbf_s > 0) env.emplace_back("TENAX_RUN_MTBF", milliseconds(plan.observed_mtbf_s));
  if (plan.observed_shared_mtbf_s > 0)
    env.emplace_back("TENAX_RUN_SHARED_MTBF", milliseconds(plan.observed_shared_mtbf_s));
  return env;
}

bool may_span_hosts(const std::vector<std::string>& mpirun_args) {
  for (const std::string& arg : mpirun_args) {
    const std::string name = arg.substr(0, arg.find('='));
    for (const char* option : {"-H", "--host", "-host", "--hostfile", "-hostfile", "--machinefile", "-machinefile",
                               "--default-hostfile", "-default-hostfile", "--rankfile", "-rankfile", "-rf",
                               "--add-host", "-add-host", "--add-hostfile", "-add-hostfile"})
      if (name == option) return true;
    // A default hostfile given as an MCA parameter (--mca rmaps_base_default_hostfile FILE).
    if (arg.find("default_hostfile") != std::string::npos) return true;
  }
  // Hostfiles given through the environment, and allocations mpirun spreads ranks over by itself (Slurm with more
  // than one node, PBS/Torque, LSF, Grid Engine).
  for (const char* variable :
       {"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_rmaps_base_default_hostfile", "PRTE_MCA_prte_default_hostfile",
        "PBS_NODEFILE", "LSB_JOBID", "LSB_HOSTS", "PE_HOSTFILE"})
    if (const char* value = std::getenv(variable); value != nullptr && *value != '\0') return true;
  const char* slurm_nodes = std::getenv("SLURM_JOB_NUM_NODES");
  if (slurm_nodes == nullptr) slurm_nodes = std::getenv("SLURM_NNODES");
  return slurm_nodes != nullptr && std::string_view(slurm_nodes) != "1";
}

Command local_command(const Options& options, const AttemptPlan& plan, const std::string& run_dir,
                      const std::string& checkpoint_dir) {
  Command command;
  command.argv = {options.mpirun, "-n", std::to_string(plan.world_size)};
  command.argv.insert(command.argv.end(), options.extra_launcher_args.begin(), options.extra_launcher_args.end());
  command.argv.insert(command.argv.end(), options.program.begin(), options.program.end());
  command.env = protocol_env(options, plan, run_dir, checkpoint_dir);
  // Root containers, more ranks than cores and no pinning (ranks sharing few cores must not share one).
  command.env_defaults = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                          {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                          {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
                          {"OMPI_MCA_hwloc_base_binding_policy", "none"}};
  // With every rank on this host, ob1 over shared memory (vader) serves them fully; naming it skips UCX's probe for
  // network devices, which took 0.2 s of each start (and so of each restart) of 4 ranks on a 2-core VM without a
  // network UCX could use. Not when the ranks may span hosts: there UCX (InfiniBand, RoCE) is what they need.
  if (!may_span_hosts(options.extra_launcher_args)) command.env_defaults.emplace_back("OMPI_MCA_pml", "ob1");
  return command;
}

Command srun_command(const Options& options, const AttemptPlan& plan, const std::string& run_dir,
                     const std::string& checkpoint_dir) {
  Command command;
  command.argv = {options.srun, "--nodes=" + std::to_string(plan.nodes), "--ntasks=" + std::to_string(plan.world_size)};
  // After an elastic shrink the last node may hold fewer ranks: let srun spread them.
  if (plan.original_world_size == 0) command.argv.push_back("--ntasks-per-node=" + std::to_string(plan.tasks_per_node));
  if (!plan.exclude.empty()) command.argv.push_back("--exclude=" + join(plan.exclude, ","));
  // One dead task ends the step at once (detection in seconds, not at the communicator timeout).
  command.argv.push_back("--kill-on-bad-exit=1");
  // A relaunch must not wait for the previous attempt's step: when a node of it was cut off, Slurm cannot learn that
  // the step ended there and keeps its CPUs counted (with --no-kill, until the job ends), so a new step on the same
  // healthy nodes would pend for ever. The launcher has ended that step's tasks itself; --overlap lets the new step
  // share the CPUs Slurm still books to it.
  command.argv.push_back("--overlap");
  command.argv.push_back("--mpi=" + options.srun_mpi);
  command.argv.push_back("--job-name=tenax-attempt-" + std::to_string(plan.attempt));
  command.argv.insert(command.argv.end(), options.extra_launcher_args.begin(), options.extra_launcher_args.end());
  command.argv.insert(command.argv.end(), options.program.begin(), options.program.end());
  command.env = protocol_env(options, plan, run_dir, checkpoint_dir);
  return command;
}

}  // namespace tenax::launch
