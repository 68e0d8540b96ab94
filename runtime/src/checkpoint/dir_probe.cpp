#include "checkpoint/dir_probe.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <random>

#include "comm/agreement.hpp"
#include "core/file_system.hpp"
#include "core/host_name.hpp"
#include "tenax/env.hpp"
#include "tenax/log.hpp"

namespace tenax::ckpt {
namespace {

// Errors the user fixes by choosing or repairing the directory; anything else (EIO, ENOSPC, ...) is the storage's.
bool is_usage_errno(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
    case ENOTDIR:
    case EEXIST:
    case ENOENT:
    case ENAMETOOLONG:
    case ELOOP:
      return true;
    default:
      return false;
  }
}

template <class F>
void classified(const std::string& dir, int rank, F step) {
  try {
    step();
  } catch (const fs::FsError& e) {
    if (!is_usage_errno(e.error_number())) throw;
    throw UsageError("the checkpoint directory " + dir + " cannot hold checkpoints (rank " + std::to_string(rank) +
                     " on " + detail::host_name() + "): " + e.what() +
                     "; make it writable by this job or point --checkpoint-dir / TENAX_CHECKPOINT_DIR at a directory "
                     "that is");
  }
}

std::string random_token() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(::getpid());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Rank 0's lock of the checkpoint directory (dir_probe.hpp).
DirectoryLock take_lock(const std::string& dir) {
  LockUse use{"the checkpoint directory", "give each run a checkpoint directory of its own",
              env::get_string("TENAX_LAUNCHER")};
  // Under a tenax-launch that does not name itself (older than programs' locks), whose lock line names no role.
  use.admit_older_launcher = env::is_set("TENAX_ATTEMPT") && use.admitted_holder.empty();
  // The other ranks wait in one collective meanwhile, which TENAX_COMM_TIMEOUT ends: the wait for an earlier run's
  // lock stays well inside it.
  std::chrono::milliseconds wait = kEarlierRunLockWait;
  if (const auto comm_timeout = env::get_duration("TENAX_COMM_TIMEOUT"); comm_timeout.count() > 0)
    wait = std::min(wait, comm_timeout / 2);
  return DirectoryLock::take(dir, use, lock_owner_from_environment(LockRole::Program), wait);
}

}  // namespace

DirectoryLock probe_checkpoint_dir(Communicator& world, const std::string& dir) {
  const int rank = world.rank();
  std::string token;
  std::string contents;  // what rank 0 writes into the shared probe
  DirectoryLock lock;
  run_agreed(world, [&] {
    if (rank != 0) return;
    classified(dir, rank, [&] {
      fs::make_dirs(dir);
      token = random_token();
      contents = "tenax checkpoint directory probe " + token + " from rank 0 on " + detail::host_name() + "\n";
      fs::write_file_durable(fs::join(dir, kProbePrefix + token), contents);
    });
    // After the probe file, so that a directory this job cannot write is named as such (above) rather than as a lock
    // file that cannot be made; before anything a run removes or writes there.
    try {
      lock = take_lock(dir);
    } catch (...) {
      try {
        fs::remove_tree(fs::join(dir, kProbePrefix + token));
      } catch (const std::exception&) {
        // The refusal is what to report; the probe is removed with the other leftovers by the directory's next user.
      }
      throw;
    }
    if (!lock.warning().empty()) TENAX_LOG(Warn, "ckpt") << lock.warning();
  });
  token = broadcast_string(world, token, 0);
  contents = broadcast_string(world, contents, 0);
  const std::string shared = fs::join(dir, kProbePrefix + token);
  run_agreed(world, [&] {
    if (rank == 0) return;
    std::string seen;
    try {
      seen = fs::read_file(shared);
    } catch (const fs::FsError& e) {
      if (e.error_number() != ENOENT && e.error_number() != ENOTDIR && e.error_number() != EACCES) throw;
    }
    if (seen != contents) {
      const std::string from = contents.substr(contents.rfind(" on ") + 4);
      throw UsageError("the checkpoint directory " + dir + " is not the same directory on every rank: rank " +
                       std::to_string(rank) + " on " + detail::host_name() + " does not see the file " + shared +
                       " that rank 0 created on " + from.substr(0, from.size() - 1) +
                       "; checkpoints must go to a file system every node shares (a node-local path such as /tmp "
                       "makes every restart on other nodes fail): point --checkpoint-dir / TENAX_CHECKPOINT_DIR at "
                       "one");
    }
    const std::string mine = shared + "." + std::to_string(rank);
    classified(dir, rank, [&] {
      fs::write_file_durable(mine, contents);
      fs::remove_tree(mine);
    });
  });
  run_agreed(world, [&] {
    if (rank == 0) fs::remove_tree(shared);
  });
  return lock;
}

}  // namespace tenax::ckpt
