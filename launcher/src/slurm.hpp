// What the launcher reads from and asks of Slurm: the allocation (expanded by libslurm), the requeue count, whether
// the job was cancelled, and `scontrol requeue`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "processes.hpp"

namespace tenax::launch {

struct SlurmJob {
  std::string job_id;              // SLURM_JOB_ID
  std::string nodelist;            // SLURM_JOB_NODELIST (compressed: n[1-4])
  int restart_count = 0;           // SLURM_RESTART_COUNT (unset on the first run: 0)
  std::vector<std::string> nodes;  // the allocation, expanded
  std::vector<int> cpus_per_node;  // SLURM_JOB_CPUS_PER_NODE expanded, one per node; empty when unknown
  int cpus_per_task = 1;           // srun's: SRUN_CPUS_PER_TASK (1 when unset or unreadable)
};

// Reads the job from the environment and expands its node list with libslurm's hostlist parser (tenax/hostlist.hpp,
// the code `scontrol show hostnames` runs), in this process. Throws UsageError when not inside an allocation, for a
// node list Slurm's parser refuses, or when tenax-launch was built without libslurm.
SlurmJob read_slurm_job();

// Slurm's compressed per-node counts ("4(x2),2" -> {4, 4, 2}), or {} when `text` is not of that form or covers more
// than `max_nodes` nodes: the counts only serve a check made before srun, which stays the judge.
std::vector<int> expand_per_node_counts(const std::string& text, std::size_t max_nodes);

// "" when the attempt's tasks fit the CPUs the job holds on enough nodes, else the problem and its fix (srun would
// refuse the step with "More processors requested than permitted" at every attempt, which the launcher took for a
// crash and retried into a restart loop). Nothing is checked when the CPU counts are unknown, when the job
// overcommits (SLURM_OVERCOMMIT) or when --launcher-arg passes --overcommit or its own CPU count.
std::string tasks_fit_allocation(const Options& options, int nodes, int tasks_per_node, const SlurmJob& job);

// The argv of `scontrol requeue JOB` (separate for the unit tests).
std::vector<std::string> requeue_command(const Options& options, const std::string& job_id);

// Runs it; returns "" on success, else one line for the log and the ledger: the command, how it ended, what it wrote
// (stderr and stdout, bounded) and the fix. It never throws: a failed requeue must not lose the preempted exit.
// `already` (if given) is set when Slurm answered that the job is pending execution: it was requeued before
// tenax-launch asked (`scontrol requeue` by an operator, or a node failure), which is success, not a failure to report.
std::string requeue_job(const Options& options, const std::string& job_id, bool* already = nullptr);

// Whether slurmctld has job `job_id` as cancelled (scancel): std::nullopt when that cannot be told (a build without
// libslurm, slurmctld not answering within 20 s, an unknown job). It asks libslurm (slurm_load_job) for the job's base
// state: scontrol and squeue show a cancelled job whose processes still run as COMPLETING, as they do a job that
// reached its time limit or was preempted, while only a cancel is the user's wish that the job end.
std::optional<bool> job_cancelled(const std::string& job_id);

// "`ARGV` exited with status S: <stderr, then stdout, lines joined by ' | '>" (or "was killed ...").
std::string describe_failure(const std::vector<std::string>& argv, const CommandResult& result);

}  // namespace tenax::launch
