// The node-local checkpoint copies of a run, seen from tenax-launch: the job id the ranks write beside them, and their
// removal from the launcher's own node when the run ends (checkpoint/local_tier_cleanup.hpp has the contract).
//
// Under Slurm the job id is Slurm's, so that the plugin's job epilog removes the copies on every node of the job; the
// launcher's own removal then covers its node and a site without the plugin's epilog. In local mode (every rank on
// this host) the launcher's removal is the whole cleanup, with an id of its own per invocation.
#pragma once

#include <string>

namespace tenax::launch {

// "local-" and 16 random hex digits.
std::string new_local_job_id();

// Removes the copies job `job_id` left under TENAX_CKPT_LOCAL_DIR (from the launcher's environment, %n = this node:
// SLURMD_NODENAME, else the host name). Returns the line to announce ("" when there was nothing to do); never throws,
// a removal that fails is reported in the line and the run's result stands.
std::string remove_node_local_copies(const std::string& job_id);

// The line that says where job `job_id`'s copies stay when a run outside Slurm stops unfinished (they are what the
// same command, run again, resumes from; removing them would make it start over): "" when it has none.
std::string kept_node_local_copies(const std::string& job_id);

}  // namespace tenax::launch
