// The site's configuration of the plugin: the `key=value` arguments after the plugin's path in plugstack.conf.
//
//   required /usr/lib/x86_64-linux-gnu/slurm/spank_tenax.so ckpt_root=/scratch/ckpt max_restarts=5 placement=topology
//
// Every key has a default, so the plugin works with no arguments at all. An unknown key, a repeated key or a bad
// value is refused when Slurm loads the plugin (sbatch, srun, salloc and slurmstepd then fail with the message): a
// typo in the site configuration must never silently fall back to a default. Defaults are what a job gets when
// neither its options nor its environment say otherwise; limits bound what users may ask for and always win.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tenax::spank {

enum class PlacementPolicy { Topology, Block, None };

std::string_view to_string(PlacementPolicy policy);

struct AdminConfig {
  // Checkpoint directories must lie under this absolute path ("": anywhere). A policy that keeps checkpoints on the
  // right file system, not a security boundary: tasks run as the user with the user's own permissions.
  std::string ckpt_root;
  // The checkpoint directory of a job that names none (may use %u and %j); "": none, the runtime's own default.
  std::string ckpt_default;
  // The node-local directory jobs stage their datasets to when they name none (may use %u and %j); "": no staging.
  std::string data_stage_default;
  // The node-local checkpoint directory of jobs that name none (may use %u, %j and %n); "": none. The plugin's job
  // epilog removes each job's copies from it (and from a directory the job named) on every node.
  std::string ckpt_local_default;
  int default_restarts = 3;  // restarts a job gets when it asks for no number
  int max_restarts = 10;     // the most a job may ask for
  int max_spares = 16;       // the most spare nodes a job may hold back
  // One node's mean time between failures in hours, the site's own figure (0: not given). Exported to every job as
  // TENAX_NODE_MTBF: a job's automatic checkpoint interval assumes it over the job's node count until the job has seen
  // failures of its own, instead of a fixed 24 h for any job size.
  int node_mtbf_hours = 0;
  // Slurm's topology.conf describing the switch tree ("": topology.conf beside slurm.conf). Must be the same file on
  // every node (each node computes the placement on its own and all must agree).
  std::string topology_file;
  PlacementPolicy placement = PlacementPolicy::Topology;  // the default placement policy
  bool allow_placement_none = true;                       // whether users may turn placement off
  bool bind_gpus = true;                                  // set CUDA_VISIBLE_DEVICES per task when GPUs are found
  bool bind_numa = true;  // restrict each task's CPU affinity to one NUMA node when the node has several
  // An hwloc XML topology read instead of discovering the node's NUMA nodes and GPUs ("": discover with hwloc). For a
  // site that keeps a curated topology per node type, and for tests.
  std::string hw_topology;

  // Parses plugstack.conf arguments. Throws UsageError naming the argument and the fix.
  static AdminConfig parse(const std::vector<std::string>& args);
};

// Every admin key with a one-line description, in documentation order (listed when an unknown key is refused).
struct AdminKey {
  std::string_view name;
  std::string_view help;
};
const std::vector<AdminKey>& admin_keys();

// "yes"/"no" (also 1/0, true/false, on/off). Throws UsageError naming `what`.
bool parse_yes_no(std::string_view what, std::string_view value);
// A decimal integer in [min, max]. Throws UsageError naming `what`, the value and the range.
int parse_int_in(std::string_view what, std::string_view value, int min, int max, std::string_view why = {});
// "topology" | "block" | "none". Throws UsageError naming `what`.
PlacementPolicy parse_placement(std::string_view what, std::string_view value);

}  // namespace tenax::spank
