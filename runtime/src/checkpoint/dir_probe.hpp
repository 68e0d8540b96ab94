// The start-up check of a checkpoint directory: a directory that cannot hold the job's checkpoints must stop the job
// before any training is spent, with a message that names the directory and the fix, not at the first save (after
// --checkpoint-every steps of work) and not at the first restart.
#pragma once

#include <string>

#include "core/directory_lock.hpp"
#include "tenax/communicator.hpp"

namespace tenax::ckpt {

// Collective. Rank 0 creates `dir` (and its parents) and a probe file in it, and takes the directory's lock
// (core/directory_lock.hpp) unless the program's own tenax-launch (TENAX_LAUNCHER) holds it; every other rank then
// checks that it sees that file with the content rank 0 wrote (a node-local directory such as /tmp would let every
// rank "save" to its own disk and make every restart on other nodes fail), and every rank proves that it can create a
// file there; the probes are removed. Raises the same error on every rank: UsageError naming the directory, the rank,
// its host and the fix when the directory is not writable (permissions, a read-only mount, a path through a file), not
// the same directory on every rank, or in use by another run (naming it); IoError when the storage itself fails (EIO,
// ENOSPC). Returns the lock, which rank 0 holds (blocks up to kEarlierRunLockWait for the earlier run of a requeued
// Slurm job) and keeps the directory this run's until it is dropped; on other ranks, and when the file system keeps
// no locks (logged as a warning), it holds nothing.
[[nodiscard]] DirectoryLock probe_checkpoint_dir(Communicator& world, const std::string& dir);

// The probe files' name prefix (leftovers of a killed start-up are removed with the other leftovers).
inline constexpr const char* kProbePrefix = ".tenax-probe-";

}  // namespace tenax::ckpt
