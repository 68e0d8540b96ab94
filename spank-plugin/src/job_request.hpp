// What a user asks of tenax for one job, and the parsers that turn option or environment text into it.
//
// Pure C++ (no Slurm headers): the SPANK contexts, the unit tests and the documentation all share these definitions.
// Every parser throws tenax::UsageError whose message names the source (the option "--tenax-layout" or the variable
// "TENAX_LAYOUT"), the value given and what is allowed, because the message is shown as-is by sbatch/srun.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "admin_config.hpp"

namespace tenax::spank {

// A layout as the user wrote it: dp may be left out ("tp=2,pp=2") and is then inferred from the step's task count.
struct LayoutRequest {
  int tp = 1;
  int pp = 1;
  int dp = 0;  // 0: inferred, world_size / (tp * pp)
  friend bool operator==(const LayoutRequest&, const LayoutRequest&) = default;
};

// One source's answers (the command line, or the environment). Unset members were not given by that source.
struct JobRequest {
  bool enabled = false;
  std::optional<std::string> ckpt_dir;        // may hold %u (user name) and %j (job id), expanded in the job
  std::optional<std::string> data_stage_dir;  // node-local dataset copies; %u and %j as for ckpt_dir
  std::optional<std::string> ckpt_local_dir;  // node-local checkpoint tier; %u, %j and %n (node name), or "none"
  std::optional<LayoutRequest> layout;
  std::optional<PlacementPolicy> placement;
  std::optional<int> max_restarts;
  std::optional<int> spares;
  std::optional<std::string> ckpt_every;        // "auto" or whole steps, for the program's --checkpoint-every
  std::optional<std::string> ckpt_local_every;  // the same for --checkpoint-local-every
};

// The largest degree accepted for tp, pp or dp (a guard against typos such as tp=20000).
inline constexpr int kMaxLayoutDegree = 65536;

// "tp=2,pp=1,dp=2" (keys in any order, each at most once, tp and pp default to 1, dp inferred when absent) or
// "2x1x2" (tp x pp x dp). Refused too when tp*pp*dp (tp*pp without dp) exceeds kMaxStepTasks.
LayoutRequest parse_layout(std::string_view source, std::string_view text);
std::string layout_to_string(int tp, int pp, int dp);  // "tp=2,pp=1,dp=2", the form the runtime reads

// Validators that also enforce the admin limits (the limit, and the key that sets it, are named on refusal).
PlacementPolicy parse_placement_request(std::string_view source, std::string_view text, const AdminConfig& admin);
int parse_max_restarts(std::string_view source, std::string_view text, const AdminConfig& admin);
int parse_spares(std::string_view source, std::string_view text, const AdminConfig& admin);
// A directory pattern: an absolute path of at most kMaxPathLength characters without "." or ".." components,
// placeholders %u, %j and %% only. Returns it with repeated and trailing slashes removed.
std::string parse_dir_pattern(std::string_view source, std::string_view text);
// The node-local checkpoint directory: a directory pattern that may also hold %n (the node's name, expanded by each
// rank), or "none" (no node-local tier, overriding a site default).
std::string parse_ckpt_local_dir(std::string_view source, std::string_view text);
inline constexpr std::string_view kNoLocalDir = "none";
// A checkpoint interval: "auto" (the Young/Daly interval the runtime measures) or whole steps from 0 to
// kMaxCheckpointSteps, returned without leading zeros.
inline constexpr int kMaxCheckpointSteps = 1000000000;
std::string parse_ckpt_every(std::string_view source, std::string_view text);
// A checkpoint directory: a directory pattern under admin.ckpt_root when set.
std::string parse_ckpt_dir(std::string_view source, std::string_view text, const AdminConfig& admin);

// Replaces %u, %j and %% in a directory pattern (already validated by parse_dir_pattern); `what` names the setting in
// the message ("checkpoint directory"). %n is replaced by `node` when one is given, else kept for the runtime (which
// knows its node). Throws UsageError when the result is longer than kMaxPathLength.
std::string expand_dir_pattern(std::string_view what, std::string_view pattern, std::string_view user,
                               std::string_view job_id, std::optional<std::string_view> node = std::nullopt);

// The plugin's options (--tenax, --tenax-ckpt-dir, --tenax-layout, --tenax-placement, --tenax-max-restarts,
// --tenax-spares, --tenax-data-stage-dir, --tenax-ckpt-local-dir, --tenax-ckpt-every, --tenax-ckpt-local-every) and
// what each option's callback does with its value: parse it into `request` with the parsers above (messages name the
// option) and mark tenax enabled. Throws UsageError; `request` keeps its old values then.
enum class TenaxOption {
  Enable = 1,
  CkptDir,
  Layout,
  Placement,
  MaxRestarts,
  Spares,
  DataStageDir,
  CkptLocalDir,
  CkptEvery,
  CkptLocalEvery,  // the last: options.cpp checks ids against it
};
void apply_option(JobRequest& request, TenaxOption option, std::string_view value, const AdminConfig& admin);

}  // namespace tenax::spank
