// What one attempt runs: the rank count, the Slurm nodes it may use, and the exact command line and environment.
// Pure functions: the unit tests check the mpirun/srun command lines built here.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"

namespace tenax::launch {

struct AttemptPlan {
  int attempt = 1;        // 1-based, counting across restarts and requeues of this run directory
  int restart_count = 0;  // attempt - 1
  int world_size = 0;
  int nodes = 0;                     // Slurm: nodes for this step (0 in local mode)
  int tasks_per_node = 0;            // Slurm: 0 = srun decides
  std::vector<std::string> exclude;  // Slurm: excluded nodes of the allocation, sorted
  int original_world_size = 0;       // set when data parallelism was shrunk (elastic)
  // The run's wall time so far over its failures (from the ledger), once it has failed: TENAX_RUN_MTBF for the
  // program's automatic checkpoint interval. 0: no failure yet.
  double observed_mtbf_s = 0;
  // The same over the failures whose restart needed the shared tier, counting at least one: TENAX_RUN_SHARED_MTBF for
  // the shared tier's interval when a node-local tier covers the other failures. 0: no failure yet.
  double observed_shared_mtbf_s = 0;
  std::string job_id;  // TENAX_JOB_ID: the job the node-local checkpoint copies belong to (node_local_cleanup.hpp)
};

// Nodes for the next Slurm attempt from the allocation and the excluded nodes. Spares need no special handling: srun
// picks `nodes` of the allocation's nodes that are not excluded, so an excluded node's place goes to a spare.
// Throws UsageError when the options do not fit the allocation, and Error (never retried) when too few healthy nodes
// remain and elastic shrinking is not allowed or not possible.
AttemptPlan plan_slurm_attempt(const Options& options, const std::vector<std::string>& allocation,
                               const std::set<std::string>& excluded);

AttemptPlan plan_local_attempt(const Options& options);

struct Command {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;           // always set
  std::vector<std::pair<std::string, std::string>> env_defaults;  // set only when absent (the user's value wins)
};

// The TENAX_* protocol variables every rank receives (docs/worker-protocol.md).
std::vector<std::pair<std::string, std::string>> protocol_env(const Options& options, const AttemptPlan& plan,
                                                              const std::string& run_dir,
                                                              const std::string& checkpoint_dir);

// mpirun -n N [extra] PROGRAM ARGS, with Open MPI's run-as-root, oversubscription and no-binding defaults, and the
// shared-memory PML (ob1) unless the ranks may span hosts (may_span_hosts: the extra arguments name hosts, a hostfile
// or a rankfile, or the environment holds a hostfile or a multi-node allocation of Slurm, PBS, LSF or Grid Engine).
bool may_span_hosts(const std::vector<std::string>& mpirun_args);
Command local_command(const Options& options, const AttemptPlan& plan, const std::string& run_dir,
                      const std::string& checkpoint_dir);

// srun --nodes=.. --ntasks=.. [--ntasks-per-node=..] [--exclude=a,b] --kill-on-bad-exit=1 --mpi=.. [extra] PROGRAM ARGS
Command srun_command(const Options& options, const AttemptPlan& plan, const std::string& run_dir,
                     const std::string& checkpoint_dir);

std::string join(const std::vector<std::string>& items, const std::string& separator);

}  // namespace tenax::launch
