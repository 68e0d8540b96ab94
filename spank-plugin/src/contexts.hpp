// What the plugin does in each SPANK context (one file per context; dispatch.cpp calls these).
//
//   allocator (sbatch, salloc)  validate the environment layer at submission
//   local (srun)                the same (init_post_opt), before the step is created
//   remote (slurmstepd)         check the step (its task count against the layout, the split over the nodes), resolve
//                               the settings, place the step's ranks, export each task's environment, bind
//   job script (job epilog)     remove the job's node-local checkpoint copies, as the job's user
//
// The step's task count is known to SPANK only once the step exists (S_JOB_TOTAL_TASK_COUNT needs srun's step layout;
// sbatch's allocator context has none), so a layout the step cannot hold is refused by slurmstepd, never by srun's
// local_user_init: srun answers a failed local callback by exiting without completing the step it created, and inside
// an allocation (a batch script, salloc) that step then stays RUNNING and holds its nodes, so every later srun of the
// job waits for ever. A refusal in slurmstepd fails the step the way a failed launch does, and Slurm completes it.
//
// Each function returns 0 or throws (tenax::UsageError for the user's mistakes, tenax::Error for the rest); the
// dispatcher turns an exception into a message and SPANK's -1 (except the epilog, which never fails: a failed epilog
// drains the node). None acts as root on a path a user controls: the only files read are the admin's topology files
// (topology.conf, hw_topology) and what hwloc reads to discover the node; the one thing removed (the epilog's) is
// removed by a child process running as the job's user.
#pragma once

#include "spank_api.hpp"

namespace tenax::spank {

namespace allocator {
int init_post_opt(spank_t sp);  // also used by the local context
}  // namespace allocator

namespace remote {
int user_init(spank_t sp);
int task_init(spank_t sp);
}  // namespace remote

namespace job_script {
int job_epilog(spank_t sp) noexcept;  // always 0; problems go to slurmd's log
}  // namespace job_script

}  // namespace tenax::spank
