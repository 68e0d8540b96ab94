// Bounds on what the plugin accepts from the job's environment, the options and the site's plugstack.conf arguments.
//
// Everything the plugin reads in srun and slurmstepd comes from a process the user controls (the job's environment is
// the user's, and so is the command line), so every value is bounded before it sizes an allocation or enters
// arithmetic: counts are computed in 64 bits and refused beyond these limits with a message naming the variable or
// option, the value (quoted in part when long) and the fix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tenax::spank {

// The most tasks of one step on one node: Slurm's own ceiling for MaxTasksPerNode (slurm.conf(5): "May not exceed
// 65533").
inline constexpr std::int64_t kMaxTasksPerNode = 65533;
// The most tasks of one step (and so nodes, each running at least one task) that the plugin places: 2^20, some 20
// times the GPUs of today's largest systems. Placement's work grows with the ranks; this keeps it to about a second.
inline constexpr std::int64_t kMaxStepTasks = std::int64_t{1} << 20;
// The longest path accepted (PATH_MAX less its terminating NUL): checkpoint directories and the admin's paths.
inline constexpr std::size_t kMaxPathLength = 4095;

// `value` for a message, cut after 200 characters (with its full length) when longer: messages go to the user's
// terminal and slurmd's log, and a value from the environment may be megabytes.
std::string clipped(std::string_view value);
// `source=value`, the value clipped.
std::string shown_value(std::string_view source, std::string_view value);

}  // namespace tenax::spank
