#include "admin_config.hpp"

#include <charconv>
#include <set>

#include "input_limits.hpp"
#include "job_request.hpp"
#include "tenax/error.hpp"

namespace tenax::spank {

std::string_view to_string(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::Topology:
      return "topology";
    case PlacementPolicy::Block:
      return "block";
    case PlacementPolicy::None:
      return "none";
  }
  return "?";
}

const std::vector<AdminKey>& admin_keys() {
  static const std::vector<AdminKey> keys = {
      {"ckpt_root", "absolute path; checkpoint directories must lie under it (default: anywhere)"},
      {"ckpt_default", "checkpoint directory of jobs that name none, %u = user, %j = job id (default: none)"},
      {"data_stage_default",
       "node-local directory jobs stage datasets to when they name none, %u = user, %j = job "
       "id (default: none, datasets are read in place)"},
      {"ckpt_local_default",
       "node-local checkpoint directory of jobs that name none (/dev/shm or a local disk), %u = user, %j = job id, "
       "%n = node (default: none); each job's copies are removed at its end"},
      {"default_restarts", "restarts a job gets when it asks for no number (default 3)"},
      {"max_restarts", "the most restarts a job may ask for (default 10)"},
      {"max_spares", "the most spare nodes a job may hold back (default 16)"},
      {"node_mtbf_hours",
       "one node's mean time between failures in hours, for jobs' automatic checkpoint intervals (default: none)"},
      {"topology_file", "Slurm topology.conf of the switch tree (default: topology.conf beside slurm.conf)"},
      {"placement", "default placement policy: topology, block or none (default topology)"},
      {"allow_placement_none", "yes/no: whether users may turn placement off (default yes)"},
      {"bind_gpus", "yes/no: set CUDA_VISIBLE_DEVICES per task when the node has GPUs (default yes)"},
      {"bind_numa", "yes/no: bind each task's CPUs to one NUMA node when the node has several (default yes)"},
      {"hw_topology",
       "hwloc XML topology read instead of discovering the node's GPUs and NUMA nodes (default: discover)"},
  };
  return keys;
}

bool parse_yes_no(std::string_view what, std::string_view value) {
  if (value == "yes" || value == "1" || value == "true" || value == "on") return true;
  if (value == "no" || value == "0" || value == "false" || value == "off") return false;
  throw UsageError(shown_value(what, value) + ": expected yes or no");
}

int parse_int_in(std::string_view what, std::string_view value, int min, int max, std::string_view why) {
  int parsed = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || ec != std::errc{} || ptr != end || parsed < min || parsed > max) {
    std::string message = shown_value(what, value) + ": expected a whole number from " + std::to_string(min) + " to " +
                          std::to_string(max);
    if (!why.empty()) message += " (" + std::string(why) + ")";
    throw UsageError(message);
  }
  return parsed;
}

PlacementPolicy parse_placement(std::string_view what, std::string_view value) {
  if (value == "topology") return PlacementPolicy::Topology;
  if (value == "block") return PlacementPolicy::Block;
  if (value == "none") return PlacementPolicy::None;
  throw UsageError(shown_value(what, value) + ": expected topology, block or none");
}

namespace {

std::string known_keys() {
  std::string list;
  for (const auto& key : admin_keys())
    list += (list.empty() ? "" : ", ") + std::string(key.name);
  return list;
}

// An absolute path ("" allowed: the key's default) no longer than PATH_MAX allows.
void require_absolute(std::string_view key, const std::string& value) {
  const std::string shown = shown_value("plugstack.conf: " + std::string(key), value);
  if (value.size() > kMaxPathLength) {
    throw UsageError(shown + ": the path has " + std::to_string(value.size()) + " characters; paths have at most " +
                     std::to_string(kMaxPathLength) + " (PATH_MAX)");
  }
  if (!value.empty() && value.front() != '/') throw UsageError(shown + ": expected an absolute path");
}

std::string quoted(std::string_view text) {
  return "'" + clipped(text) + "'";
}

}  // namespace

AdminConfig AdminConfig::parse(const std::vector<std::string>& args) {
  AdminConfig config;
  std::set<std::string, std::less<>> seen;
  // The checkpoint keys depend on each other: validated once every key is known.
  std::string ckpt_default;
  for (const std::string& arg : args) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError("plugstack.conf: argument " + quoted(arg) + " is not key=value (known keys: " + known_keys() +
                       ")");
    }
    const std::string key = arg.substr(0, eq);
    const std::string value = arg.substr(eq + 1);
    if (!seen.insert(key).second) {
      throw UsageError("plugstack.conf: key " + quoted(key) + " is given twice; keep one");
    }
    const std::string what = "plugstack.conf: " + key;
    if (key == "ckpt_root") {
      require_absolute(key, value);
      config.ckpt_root = value;
    } else if (key == "ckpt_default") {
      ckpt_default = value;
    } else if (key == "data_stage_default") {
      config.data_stage_default = value.empty() ? "" : parse_dir_pattern(what, value);
    } else if (key == "ckpt_local_default") {
      config.ckpt_local_default = value.empty() ? "" : parse_ckpt_local_dir(what, value);
    } else if (key == "default_restarts") {
      config.default_restarts = parse_int_in(what, value, 0, 1000000);
    } else if (key == "max_restarts") {
      config.max_restarts = parse_int_in(what, value, 0, 1000000);
    } else if (key == "max_spares") {
      config.max_spares = parse_int_in(what, value, 0, 1000000);
    } else if (key == "node_mtbf_hours") {
      // At most the runtime's longest duration (10^6 h); 0 is the default (no figure) written out.
      config.node_mtbf_hours = parse_int_in(what, value, 0, 1000000, "hours; 0: none");
    } else if (key == "topology_file") {
      require_absolute(key, value);
      config.topology_file = value;
    } else if (key == "placement") {
      config.placement = parse_placement(what, value);
    } else if (key == "allow_placement_none") {
      config.allow_placement_none = parse_yes_no(what, value);
    } else if (key == "bind_gpus") {
      config.bind_gpus = parse_yes_no(what, value);
    } else if (key == "bind_numa") {
      config.bind_numa = parse_yes_no(what, value);
    } else if (key == "hw_topology") {
      require_absolute(key, value);
      config.hw_topology = value;
    } else {
      throw UsageError("plugstack.conf: unknown key " + quoted(key) + " (known keys: " + known_keys() + ")");
    }
  }
  if (config.default_restarts > config.max_restarts) {
    throw UsageError("plugstack.conf: default_restarts=" + std::to_string(config.default_restarts) +
                     " exceeds max_restarts=" + std::to_string(config.max_restarts) + "; lower it or raise the limit");
  }
  if (config.placement == PlacementPolicy::None && !config.allow_placement_none) {
    throw UsageError("plugstack.conf: placement=none contradicts allow_placement_none=no; choose topology or block");
  }
  if (!ckpt_default.empty()) {
    // The default must obey the same rules as a user's directory, including ckpt_root.
    config.ckpt_default = parse_ckpt_dir("plugstack.conf: ckpt_default", ckpt_default, config);
  }
  return config;
}

}  // namespace tenax::spank
