#include "job_settings.hpp"

namespace tenax::spank {

JobRequest request_from_environment(const EnvLookup& lookup, const AdminConfig& admin) {
  JobRequest request;
  if (auto value = lookup(kEnvCkptDir)) request.ckpt_dir = parse_ckpt_dir(kEnvCkptDir, *value, admin);
  // Inside a tenax task (TENAX_WORLD_SIZE is exported to tasks only) TENAX_LAYOUT is the enclosing step's complete
  // layout, an output of this plugin: a step nested in that task must not inherit it as a request.
  if (!lookup(kEnvWorldSize)) {
    if (auto value = lookup(kEnvLayout)) request.layout = parse_layout(kEnvLayout, *value);
  }
  if (auto value = lookup(kEnvPlacement)) request.placement = parse_placement_request(kEnvPlacement, *value, admin);
  if (auto value = lookup(kEnvMaxRestarts)) request.max_restarts = parse_max_restarts(kEnvMaxRestarts, *value, admin);
  if (auto value = lookup(kEnvSpares)) request.spares = parse_spares(kEnvSpares, *value, admin);
  if (auto value = lookup(kEnvDataStageDir)) request.data_stage_dir = parse_dir_pattern(kEnvDataStageDir, *value);
  if (auto value = lookup(kEnvCkptLocalDir)) request.ckpt_local_dir = parse_ckpt_local_dir(kEnvCkptLocalDir, *value);
  if (auto value = lookup(kEnvCkptEvery); value && !value->empty())
    request.ckpt_every = parse_ckpt_every(kEnvCkptEvery, *value);
  if (auto value = lookup(kEnvCkptLocalEvery); value && !value->empty())
    request.ckpt_local_every = parse_ckpt_every(kEnvCkptLocalEvery, *value);
  return request;
}

JobSettings resolve_settings(const JobRequest& options, const JobRequest& environment, const AdminConfig& admin) {
  JobSettings settings;
  settings.ckpt_dir = options.ckpt_dir.value_or(environment.ckpt_dir.value_or(admin.ckpt_default));
  settings.layout = options.layout ? options.layout : environment.layout;
  settings.layout_source = options.layout ? "--tenax-layout" : kEnvLayout;
  settings.placement = options.placement.value_or(environment.placement.value_or(admin.placement));
  settings.max_restarts = options.max_restarts.value_or(environment.max_restarts.value_or(admin.default_restarts));
  settings.spares = options.spares.value_or(environment.spares.value_or(0));
  settings.data_stage_dir =
      options.data_stage_dir.value_or(environment.data_stage_dir.value_or(admin.data_stage_default));
  settings.ckpt_local_dir =
      options.ckpt_local_dir.value_or(environment.ckpt_local_dir.value_or(admin.ckpt_local_default));
  settings.ckpt_every = options.ckpt_every.value_or(environment.ckpt_every.value_or(""));
  settings.ckpt_local_every = options.ckpt_local_every.value_or(environment.ckpt_local_every.value_or(""));
  return settings;
}

}  // namespace tenax::spank
