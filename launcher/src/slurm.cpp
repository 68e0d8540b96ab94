#include "slurm.hpp"

#include <climits>
#include <cstdlib>
#include <sstream>

#include "processes.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

std::string getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

SlurmJob read_slurm_job(const Options& options) {
  SlurmJob job;
  job.job_id = getenv_or_empty("SLURM_JOB_ID");
  if (job.job_id.empty()) {
    throw UsageError(
        "Slurm mode needs an allocation (SLURM_JOB_ID is not set): run inside sbatch/salloc, or use "
        "--mode local");
  }
  job.nodelist = getenv_or_empty("SLURM_JOB_NODELIST");
  if (job.nodelist.empty())
    throw UsageError("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: not a Slurm job step?");
  const std::string restarts = getenv_or_empty("SLURM_RESTART_COUNT");
  if (!restarts.empty())
    job.restart_count = static_cast<int>(env::parse_int("SLURM_RESTART_COUNT", restarts, 0, INT_MAX));
  auto [status, output] = run_and_capture({options.scontrol, "show", "hostnames", job.nodelist});
  if (status != 0) {
    throw Error("'" + options.scontrol + " show hostnames " + job.nodelist + "' failed with status " +
                std::to_string(status));
  }
  std::istringstream lines(output);
  std::string node;
  while (std::getline(lines, node)) {
    if (!node.empty()) job.nodes.push_back(node);
  }
  return job;
}

std::vector<std::string> requeue_command(const Options& options, const std::string& job_id) {
  return {options.scontrol, "requeue", job_id};
}

std::string requeue_job(const Options& options, const std::string& job_id) {
  try {
    auto [status, output] = run_and_capture(requeue_command(options, job_id));
    if (status == 0) return "";
    return "scontrol requeue exited with status " + std::to_string(status) + " " + output;
  } catch (const Error& error) {
    return error.what();
  }
}

}  // namespace tenax::launch
