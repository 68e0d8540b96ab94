// One tenax-launch per run directory and per checkpoint directory. Two launchers in one run directory would append to
// one ledger (each judging restarts by the other's attempts) and overwrite each other's heartbeats; two in one
// checkpoint directory would write the same step's temporary folder at once and remove each other's checkpoints by
// retention. Each launcher therefore holds an exclusive flock(2) on `<dir>/tenax-launch.lock` for its whole life, and a
// second one is refused before it writes anything there.
//
// flock rather than a file that merely exists: the kernel (or the NFS server, whose lease ends when a client dies)
// drops the lock when its holder dies, even by SIGKILL, so a crashed launcher never leaves a directory locked. The
// descriptor is close-on-exec, so the ranks and mpirun/srun never hold it. The holder writes who it is into the file
// (pid, host, Slurm job and restart count, start time) so that a refused launcher can say who is in the way.
//
// A requeued Slurm job starts after Slurm ended its earlier run; a lock the earlier run (same job id, lower restart
// count) still holds can only belong to a host that is gone or a process that outlived the job. It is waited for (up to
// `earlier_run_wait`), then taken over with a warning: a requeued job must not be kept from running by its own past.
// On a file system without locks the directory is used unlocked, with a warning. An NFS mount with `local_lock=flock`
// (or `all`, or `nolock`) keeps flock locks on each client only: two launchers on two hosts then both get the lock,
// and nothing here can tell. On NFSv3 a lock held by a host that died may stay until that host reboots: the refusal
// names the lock file to remove.
#pragma once

#include <chrono>
#include <string>

#include "core/unique_fd.hpp"

namespace tenax::launch {

inline constexpr const char* kLaunchLockFile = "tenax-launch.lock";

struct LockOwner {
  std::string job_id;     // SLURM_JOB_ID; "" outside Slurm (local mode)
  int restart_count = 0;  // SLURM_RESTART_COUNT
};

class DirectoryLock {
 public:
  DirectoryLock() = default;

  // Takes `dir`'s lock for `self` (the directory must exist). `option` names the directory in messages
  // ("--run-dir"). Throws UsageError when another launcher holds it (naming that launcher, the fix and the way out
  // when that launcher is gone) or when the lock file cannot be opened. Never blocks longer than `earlier_run_wait`.
  static DirectoryLock take(const std::string& dir, const std::string& option, const LockOwner& self,
                            std::chrono::milliseconds earlier_run_wait);

  bool held() const { return fd_.valid(); }

  // Called before each attempt: whether the lock file held is still the one at its path. A directory removed or
  // emptied by hand while the run used it takes the file away (the lock then keeps nobody out: a second launcher
  // creates a new file and locks that); the directory and its lock are then made and taken again, and the warning to
  // log is returned ("" when nothing changed). Throws UsageError when another launcher took the directory meanwhile.
  std::string renew(const LockOwner& self);
  // What the launcher should log as a warning after take() ("" when nothing): the lock taken over from an earlier run
  // of the job, or a file system without locks.
  const std::string& warning() const { return warning_; }

 private:
  UniqueFd fd_;
  std::string dir_, option_;
  std::string warning_;
};

// The holder line written into the lock file ("pid=12 host=n1 job=345 restart=1 since=2026-11-29T15:00:00Z") and the
// owner read back from one (fields missing or malformed: job "" and restart 0).
std::string lock_holder_line(const LockOwner& self);
LockOwner parse_lock_holder(const std::string& line);

}  // namespace tenax::launch
