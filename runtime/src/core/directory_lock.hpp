// One writer per directory: one tenax-launch per run directory, and one run per checkpoint directory. Two launchers in
// one run directory would append to one ledger (each judging restarts by the other's attempts) and overwrite each
// other's heartbeats; two runs in one checkpoint directory would write the same step's temporary folder at once, and
// each run's start removes the unfinished checkpoints it finds there (the other's save under way) and its retention the
// other's checkpoints. Whoever writes holds an exclusive flock(2) on `<dir>/tenax-launch.lock` for its whole life: each
// tenax-launch on its run and checkpoint directories, and rank 0 of a program's checkpointer on the checkpoint
// directory unless the program's own tenax-launch holds that one already (TENAX_LAUNCHER names it). A second writer is
// refused before it writes anything there.
//
// flock rather than a file that merely exists: the kernel (or the NFS server, whose lease ends when a client dies)
// drops the lock when its holder dies, even by SIGKILL, so a crashed holder never leaves a directory locked. The
// descriptor is close-on-exec, so processes a holder starts (a launcher's mpirun or srun) never hold it. The holder
// writes who it is into the file (what it is, pid, host, Slurm job and restart count, start time) so that a refused
// writer can say who is in the way.
//
// A requeued Slurm job starts after Slurm ended its earlier run; a lock the earlier run (same job id, lower restart
// count) still holds can only belong to a host that is gone or a process that outlived the job. It is waited for (up to
// `earlier_run_wait`), then taken over with a warning: a requeued job must not be kept from running by its own past.
// On a file system without locks the directory is used unlocked, with a warning. An NFS mount with `local_lock=flock`
// (or `all`, or `nolock`) keeps flock locks on each client only: two writers on two hosts then both get the lock,
// and nothing here can tell. On NFSv3 a lock held by a host that died may stay until that host reboots: the refusal
// names the lock file to remove.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/unique_fd.hpp"

namespace tenax {

// The name is the launcher's, which took it first; programs lock the same file, so that either keeps the other out.
inline constexpr const char* kLaunchLockFile = "tenax-launch.lock";

// What holds (or wants) a directory's lock, as messages name it.
enum class LockRole { Launcher, Program };

// Who holds (or wants) a lock. An earlier run of the same writer still holding it — the same Slurm job at a lower
// restart count, or (programs) an earlier attempt under the same tenax-launch — is waited for, then taken over.
struct LockOwner {
  std::string job_id;     // SLURM_JOB_ID; "" outside Slurm (local mode)
  int restart_count = 0;  // SLURM_RESTART_COUNT
  LockRole role = LockRole::Launcher;
  std::string launcher;  // programs: TENAX_LAUNCHER, the tenax-launch they run under ("" none)
  int attempt = 0;       // programs under a launcher: TENAX_ATTEMPT
};

// How one writer uses a directory, for take()'s messages and its one exception.
struct LockUse {
  std::string option;  // how messages name the directory: "--run-dir", "the checkpoint directory"
  std::string fix;     // what a refused writer should do instead: "give this one another --run-dir"
  // A holder to work under rather than be refused by: the identity (lock_holder_identity()) of the program's own
  // tenax-launch, which holds the directory for the whole run. "" admits nobody.
  std::string admitted_holder;
  // Also work under a holder line that names no role: what a tenax-launch older than programs' locks writes, which
  // passes no TENAX_LAUNCHER either. For a program that runs under a launcher (TENAX_ATTEMPT set) but was not told
  // which: refused by its own launcher, the run would stop.
  bool admit_older_launcher = false;
};

class DirectoryLock {
 public:
  DirectoryLock() = default;

  // Takes `dir`'s lock for `self` (the directory must exist). Throws UsageError when another writer holds it (naming
  // that writer, `use.fix` and the way out when that writer is gone) or when the lock file cannot be opened. Returns
  // a lock not held, without a warning, when `use.admitted_holder` holds it (then a second writer of this process
  // admitted on the same directory is refused). Never blocks longer than `earlier_run_wait`.
  static DirectoryLock take(const std::string& dir, const LockUse& use, const LockOwner& self,
                            std::chrono::milliseconds earlier_run_wait);

  bool held() const { return fd_.valid(); }
  // The directory is held by the admitted holder (and so not by this lock).
  bool admitted() const { return admitted_; }

  // Called before each attempt: whether the lock file held is still the one at its path. A directory removed or
  // emptied by hand while the run used it takes the file away (the lock then keeps nobody out: a second launcher
  // creates a new file and locks that); the directory and its lock are then made and taken again, and the warning to
  // log is returned ("" when nothing changed). Throws UsageError when another writer took the directory meanwhile.
  std::string renew(const LockOwner& self);
  // What the holder should log as a warning after take() ("" when nothing): the lock taken over from an earlier run
  // of the job, or a file system without locks.
  const std::string& warning() const { return warning_; }

 private:
  UniqueFd fd_;
  std::string dir_;
  LockUse use_;
  std::string warning_;
  bool admitted_ = false;
  std::shared_ptr<void> admitted_claim_;  // while admitted: this process's claim of the directory
};

// The holder line written into the lock file ("pid=12 host=n1 role=program job=345 restart=1 launcher=n0:77
// attempt=2 since=2026-11-29T15:00:00Z") and the owner read back from one (fields missing or malformed: job "",
// restart 0, launcher "", attempt 0, and the launcher's role, which wrote none before programs took locks too).
std::string lock_holder_line(const LockOwner& self);
LockOwner parse_lock_holder(const std::string& line);
// This process's Slurm job and restart count from SLURM_JOB_ID and SLURM_RESTART_COUNT (a count that is not one: as on
// a first run), so that a requeued job recognises a lock its earlier run left; for a program also its launcher and
// attempt (TENAX_LAUNCHER, TENAX_ATTEMPT), so that an attempt recognises the lock an earlier one left.
LockOwner lock_owner_from_environment(LockRole role);

// How long a requeued job waits for its earlier run's lock before taking it over.
inline constexpr std::chrono::milliseconds kEarlierRunLockWait{30'000};

// "host:pid" of this process, as its holder line names it: what tenax-launch passes its ranks as TENAX_LAUNCHER.
std::string lock_holder_identity();

}  // namespace tenax
