// Reading the launcher's environment, and mapping exceptions to the protocol's exit codes.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/worker.hpp"

namespace tenax::worker {
namespace {

std::string node_name() {
  // Emulated Slurm nodes share one host name; SLURMD_NODENAME is the node the task really belongs to.
  if (const char* slurm_node = std::getenv("SLURMD_NODENAME"); slurm_node != nullptr && *slurm_node != '\0') {
    return slurm_node;
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host) != 0) return "unknown-host";
  return host;
}

int slurm_restart_count() {
  const char* value = std::getenv("SLURM_RESTART_COUNT");  // unset on a job's first run
  if (value == nullptr || *value == '\0') return 0;
  return static_cast<int>(env::parse_int("SLURM_RESTART_COUNT", value, 0, INT_MAX));
}

}  // namespace

LaunchInfo launch_info() {
  LaunchInfo info;
  info.run_dir = env::get_string("TENAX_RUN_DIR");
  info.supervised = !info.run_dir.empty();
  info.checkpoint_dir = env::get_string("TENAX_CHECKPOINT_DIR");
  info.attempt = static_cast<int>(env::get_int("TENAX_ATTEMPT"));
  info.restart_count = static_cast<int>(env::get_int("TENAX_RESTART_COUNT"));
  info.original_world_size = static_cast<int>(env::get_int("TENAX_ORIGINAL_WORLD_SIZE"));
  info.slurm_restart_count = slurm_restart_count();
  info.node = node_name();
  return info;
}

int exit_code_for(const std::exception& error) noexcept {
  if (dynamic_cast<const UsageError*>(&error) != nullptr) return kExitUsage;
  if (dynamic_cast<const CommError*>(&error) != nullptr) return kExitPeerFailure;
  return kExitCrash;
}

}  // namespace tenax::worker
