// The SPANK plugin's options (--tenax-layout, --tenax-ckpt-dir, ...) through apply_option, what each option's callback
// runs in sbatch, salloc and srun. The first byte picks the option and the admin configuration, the rest is the value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "admin_config.hpp"
#include "input_limits.hpp"
#include "job_request.hpp"
#include "tenax/error.hpp"

namespace {

const tenax::spank::AdminConfig& admin(int which) {
  static const tenax::spank::AdminConfig open = tenax::spank::AdminConfig::parse({});
  static const tenax::spank::AdminConfig strict = tenax::spank::AdminConfig::parse(
      {"ckpt_root=/scratch/ckpt", "max_restarts=5", "max_spares=2", "allow_placement_none=no"});
  return which == 0 ? open : strict;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tenax::spank;
  if (size == 0) return 0;
  constexpr int kOptions = static_cast<int>(TenaxOption::DataStageDir);
  const auto option = static_cast<TenaxOption>(1 + data[0] % kOptions);
  const AdminConfig& config = admin((data[0] / kOptions) % 2);
  const std::string_view value(reinterpret_cast<const char*>(data + 1), size - 1);
  JobRequest request;
  try {
    apply_option(request, option, value, config);
  } catch (const tenax::UsageError&) {
    return 0;  // refused with a message: the parser's own answer
  }
  // What was accepted is within every bound the rest of the plugin relies on.
  if (!request.enabled) __builtin_trap();
  if (request.layout) {
    const auto& l = *request.layout;
    if (l.tp < 1 || l.pp < 1 || l.dp < 0) __builtin_trap();
    if (std::int64_t{l.tp} * l.pp * (l.dp == 0 ? 1 : l.dp) > kMaxStepTasks) __builtin_trap();
  }
  for (const auto* dir : {&request.ckpt_dir, &request.data_stage_dir}) {
    if (!*dir) continue;
    if ((*dir)->empty() || (*dir)->size() > kMaxPathLength || (*dir)->front() != '/') __builtin_trap();
    try {
      expand_dir_pattern("directory", **dir, "user", "123");
    } catch (const tenax::UsageError&) {
      // a pattern whose expansion is longer than a path may be: refused with a message
    }
  }
  if (request.max_restarts && (*request.max_restarts < 0 || *request.max_restarts > config.max_restarts))
    __builtin_trap();
  if (request.spares && (*request.spares < 0 || *request.spares > config.max_spares)) __builtin_trap();
  if (request.placement == PlacementPolicy::None && !config.allow_placement_none) __builtin_trap();
  return 0;
}
