// What the plugin does in each SPANK context (one file per context; dispatch.cpp calls these).
//
//   allocator (sbatch, salloc)  validate the environment layer at submission
//   local (srun)                the same, plus the layout against the step's task count, before tasks start
//   remote (slurmstepd)         resolve the settings, place the step's ranks, export each task's environment, bind
//
// Each function returns 0 or throws (tenax::UsageError for the user's mistakes, tenax::Error for the rest); the
// dispatcher turns an exception into a message and SPANK's -1. None acts as root on a path a user controls: the only
// files read are the admin's topology files (topology.conf, hw_topology) and what hwloc reads to discover the node, and
// nothing is created or written.
#pragma once

#include "spank_api.hpp"

namespace tenax::spank {

namespace allocator {
int init_post_opt(spank_t sp);  // also used by the local context
}  // namespace allocator

namespace local {
int user_init(spank_t sp);
}  // namespace local

namespace remote {
int user_init(spank_t sp);
int task_init(spank_t sp);
}  // namespace remote

}  // namespace tenax::spank
