// A job's effective tenax settings: command-line option > environment > admin default, admin limits always.
//
// Limits are enforced where each value is parsed (an over-limit option or variable is refused with a message, never
// silently clamped), so resolution only has to pick, per setting, the first source that gives it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "admin_config.hpp"
#include "job_request.hpp"

namespace tenax::spank {

// The environment variables that users may set instead of options (same names as the ones exported to tasks).
inline constexpr const char* kEnvCkptDir = "TENAX_CHECKPOINT_DIR";
inline constexpr const char* kEnvLayout = "TENAX_LAYOUT";
inline constexpr const char* kEnvPlacement = "TENAX_PLACEMENT";
inline constexpr const char* kEnvMaxRestarts = "TENAX_MAX_RESTARTS";
inline constexpr const char* kEnvSpares = "TENAX_SPARES";
// The site's max_restarts, so that tenax-launch can hold --max-restarts to it as the plugin holds the options.
inline constexpr const char* kEnvSiteMaxRestarts = "TENAX_SITE_MAX_RESTARTS";
inline constexpr const char* kEnvSiteMaxSpares = "TENAX_SITE_MAX_SPARES";
inline constexpr const char* kEnvDataStageDir = "TENAX_DATA_STAGE_DIR";
inline constexpr const char* kEnvCkptLocalDir = "TENAX_CKPT_LOCAL_DIR";
inline constexpr const char* kEnvCkptEvery = "TENAX_CKPT_EVERY";
inline constexpr const char* kEnvCkptLocalEvery = "TENAX_CKPT_LOCAL_EVERY";
// The site's node_mtbf_hours ("<N>h"); a value already in the job's environment stays (the runtime validates it).
inline constexpr const char* kEnvNodeMtbf = "TENAX_NODE_MTBF";
// Exported to tasks only (never read as a setting).
inline constexpr const char* kEnvWorldSize = "TENAX_WORLD_SIZE";

struct JobSettings {
  std::string ckpt_dir;  // pattern with %u/%j; "" when no source gives one (the runtime's own default applies)
  std::optional<LayoutRequest> layout;  // unset: tp=1, pp=1, dp = task count
  std::string layout_source;            // "--tenax-layout" or "TENAX_LAYOUT", for messages
  PlacementPolicy placement = PlacementPolicy::Topology;
  int max_restarts = 0;
  int spares = 0;
  std::string data_stage_dir;    // pattern with %u/%j; "": no staging (datasets are read where they are)
  std::string ckpt_local_dir;    // pattern with %u/%j/%n; "" or "none": no node-local checkpoint tier
  std::string ckpt_every;        // "auto" or steps; "": the program's own interval
  std::string ckpt_local_every;  // the same for the node-local tier
};

// Reads the environment layer through `lookup` (returns nullopt for an unset variable): getenv in sbatch/srun, the
// job's environment in slurmstepd. Values are validated against the admin limits; errors name the variable.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
JobRequest request_from_environment(const EnvLookup& lookup, const AdminConfig& admin);

JobSettings resolve_settings(const JobRequest& options, const JobRequest& environment, const AdminConfig& admin);

}  // namespace tenax::spank
