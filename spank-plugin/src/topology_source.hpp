// Which switch tree a step is placed on: the admin's topology_file, else topology.conf beside slurm.conf.
#pragma once

#include <string>

#include "admin_config.hpp"
#include "tenax/topology.hpp"

namespace tenax::spank {

// `slurm_conf`: the path of slurm.conf in slurmstepd's own environment (SLURM_CONF, never the job's). A topology_file
// the admin named must exist: a missing one throws Error naming the key, the path and the fix (a silent fallback would
// place every step as if the cluster had no switches). Without the key, topology.conf beside slurm.conf is read when
// present; when absent every node is its own leaf switch and `note` (if given) says so for the log.
SwitchTree load_switch_tree(const AdminConfig& admin, const std::string& slurm_conf, std::string* note = nullptr);

}  // namespace tenax::spank
