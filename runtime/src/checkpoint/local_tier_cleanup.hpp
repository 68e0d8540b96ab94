// Removing a finished job's node-local checkpoint copies: the one piece of the node-local tier's on-disk contract that
// the tools outside the runtime share.
//
// Every folder <local_dir>/tenax-<key>/ of the tier (local_tier.hpp) holds a file `job-id` naming the job that last
// used it (TENAX_JOB_ID, set by tenax-launch, else SLURM_JOB_ID). At the end of a job two callers remove what that job
// left on a node, so that /dev/shm or a local disk is not left full and a later job never finds stale copies:
//   - the SPANK plugin's job epilog, on every node of a Slurm job (as the job's user, see spank-plugin/src);
//   - tenax-launch, on its own node, when it ends (the one node of a local run).
// Only folders named tenax-<16 hex digits> whose `job-id` holds exactly `job_id` are removed; anything else in
// local_dir (other jobs' copies, folders without the file, files, symbolic links) is left alone. Symbolic links inside
// a removed folder are removed as links, never followed, so a link planted in the tree cannot make the caller delete
// what it points to. The code is plain POSIX on the standard library (no libtenax, no exceptions escape) because the
// plugin runs it inside Slurm's root daemons.
//
// A folder a living process holds is not removed: each rank's writable Checkpointer holds a shared flock(2) on the
// folder's `in-use` file (hold_local_tier_folder) from before it writes `job-id` until it is destroyed, and the
// removal first takes that lock exclusively without waiting. When it cannot, a living process holds the folder
// (another component of a heterogeneous job on the same node, whose copies name the leader's id too, or a process that
// outlived its job) and the folder is left and listed. The lock, not the job's state in Slurm, decides: the epilog
// needs no call to slurmctld, and the kernel drops the lock with the last process. Read-only checkpointers of the job
// hold the lock too while they exist, where the folder is there already (hold_existing_local_tier_folder), and take it
// as a writer does before they write a partner's copy into it. What it does not cover: the time between two attempts
// of a run (no rank holds the folder until the next attempt's checkpointer exists).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::ckpt {

inline constexpr const char* kLocalTierPrefix = "tenax-";
inline constexpr const char* kLocalTierJobFile = "job-id";
inline constexpr const char* kLocalTierInUseFile = "in-use";
// The longest job id the file may hold (Slurm's are 10 digits, tenax-launch's own "local-" and 16 hex digits).
inline constexpr std::size_t kMaxJobIdLength = 64;

struct LocalCleanupReport {
  int removed = 0;                  // tier folders of the job removed
  int kept = 0;                     // tier folders of other jobs (or without a job-id file) left alone
  std::vector<std::string> in_use;  // the job's folders left because a living process holds them (their paths)
  std::uint64_t bytes = 0;          // size of the files removed
  std::vector<std::string> errors;  // what could not be read or removed, each naming the path and the reason
};

// `local_dir` with every "%n" replaced by the node's name (emulated nodes that share one file system).
std::string expand_node(const std::string& local_dir, const std::string& node);

// Whether `name` is a tier folder's name (tenax- and 16 lower-case hex digits).
bool is_local_tier_folder(std::string_view name);

// Marks the tier folder `folder` (<local_dir>/tenax-<key>; created mode 0700 when missing, its parent must exist) as
// used by this process until the returned descriptor is closed: opens (creating it, mode 0600) its in-use file and
// takes a shared flock on it. A removal under way is waited for, up to 10 s, and a folder it removed meanwhile is made
// again. Returns -1 with errno set when the folder or file cannot be made or locked (EWOULDBLOCK: a removal still
// holds it); the caller decides what that means. The descriptor is close-on-exec.
int hold_local_tier_folder(const std::string& folder);

// The same shared lock for a checkpointer that only reads (CheckpointOptions::read_only), on a folder of the reader's
// own job (`job_id`, non-empty, what its `job-id` file holds) that already has its in-use file. Another job's folder is
// not held: that job's end removes it, and a reader elsewhere must not make it stay. Nothing is made, no link is
// followed (the folder's or the file's), and a removal under way is not waited for (its copies are going; a load that
// finds one gone falls back to the shared tier). Returns -1 with errno set: ENOENT (no folder or in-use file: no
// copies to read either), EPERM (no job id, or the folder names another job or none), ELOOP, ENOTDIR or EINVAL (a
// link or something else in the place of the folder or the file), EWOULDBLOCK (a removal holds it).
int hold_existing_local_tier_folder(const std::string& folder, std::string_view job_id);

// The job a tier folder's `job-id` file names; "" when it has none (or no such folder, a link in its place, or a file
// tenax did not write).
std::string local_tier_folder_job(const std::string& folder);

// Removes every tier folder of job `job_id` directly under `local_dir` (already expanded: no %n). A missing local_dir
// is not an error (the job never wrote there). A folder of the job that a living process holds is left and listed in
// the report's in_use. Never throws; problems are listed in the report's errors.
LocalCleanupReport remove_job_local_copies(const std::string& local_dir, std::string_view job_id);

// The same for a job known by several ids: a folder is removed when its `job-id` holds any of them. A component of a
// heterogeneous Slurm job has an id of its own and the leader's (SLURM_HET_JOB_ID), and its ranks may have written
// either: tenax-launch names the job by the id its batch script sees, the leader's.
LocalCleanupReport remove_job_local_copies(const std::string& local_dir, const std::vector<std::string>& job_ids);

}  // namespace tenax::ckpt
