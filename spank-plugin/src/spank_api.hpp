// Slurm's SPANK API for the C++ side of the plugin, and the few helpers every context uses.
//
// spank.h declares the slurm_spank_* callbacks outside its own extern "C" block: included bare from C++ they would get
// C++ linkage and Slurm would never find them. Every file includes spank.h through this header only.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tenax::spank {

// Every message the plugin prints starts with this, so users and admins can tell where it came from.
inline constexpr const char* kMessagePrefix = "tenax: ";

// An error shown to the user (stderr of sbatch/srun, the step's log in slurmstepd).
void report_error(const std::string& message);
// Details for the admin: slurmd's log at info / debug level.
void log_info(const std::string& message);
void log_debug(const std::string& message);

// The job's environment in slurmstepd (spank_getenv); nullopt when the variable is unset.
std::optional<std::string> job_getenv(spank_t sp, const char* name);
// Sets a variable in the job's (or, from task callbacks, the task's) environment. Throws tenax::Error on failure.
void job_setenv(spank_t sp, const char* name, const std::string& value, bool overwrite = true);

// spank_get_item for the integer items; throws tenax::Error naming the item when Slurm refuses it.
std::uint32_t item_u32(spank_t sp, spank_item_t item, const char* item_name);
int item_int(spank_t sp, spank_item_t item, const char* item_name);

}  // namespace tenax::spank
