// Reading the launcher's environment, and mapping exceptions to the protocol's exit codes.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "core/host_name.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/worker.hpp"

namespace tenax::worker {
namespace {

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
  info.node = detail::node_name();
  return info;
}

int exit_code_for(const std::exception& error) noexcept {
  if (dynamic_cast<const UsageError*>(&error) != nullptr) return kExitUsage;
  if (dynamic_cast<const CommError*>(&error) != nullptr) return kExitPeerFailure;
  return kExitCrash;
}

}  // namespace tenax::worker
