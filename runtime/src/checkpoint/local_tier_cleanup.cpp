// Removal of one job's node-local tier folders with *at() system calls relative to open directory descriptors and
// O_NOFOLLOW everywhere: the walk never leaves the folder it was asked to remove, whatever links it contains.
// (std::filesystem::remove_all does not follow links either, but works by path name and throws or stops at the first
// error; here every entry is tried and every failure reported, which an epilog that must not fail needs.)
#include "checkpoint/local_tier_cleanup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/unique_fd.hpp"

namespace tenax::ckpt {
namespace {

// The tier's own depth is 5 (tenax-<key>/partner/rank_R/step_N.tmp/file); a deeper tree was not written by tenax.
constexpr int kMaxDepth = 16;

std::string describe(const std::string& path, const char* what, int error) {
  return path + ": " + what + " failed: " + std::strerror(error);
}

// The names in an open directory (its descriptor stays open; fdopendir takes a duplicate).
bool list(int dir_fd, const std::string& path, std::vector<std::string>& names, LocalCleanupReport& report) {
  UniqueFd dup(::dup(dir_fd));
  if (dup.get() < 0) {
    report.errors.push_back(describe(path, "dup", errno));
    return false;
  }
  DIR* dir = ::fdopendir(dup.get());
  if (dir == nullptr) {
    report.errors.push_back(describe(path, "opendir", errno));
    return false;
  }
  dup.release();
  ::rewinddir(dir);
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
    errno = 0;
  }
  const int error = errno;
  ::closedir(dir);
  if (error != 0) {
    report.errors.push_back(describe(path, "readdir", error));
    return false;
  }
  return true;
}

// Removes the entry `name` of the directory open as parent_fd, and everything below it. Returns false when something
// stayed (listed in the report).
bool remove_entry(int parent_fd, const std::string& parent_path, const std::string& name, int depth,
                  LocalCleanupReport& report) {
  const std::string path = parent_path + "/" + name;
  struct stat st {};
  if (::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return true;
    report.errors.push_back(describe(path, "stat", errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {  // files and symbolic links alike: the name goes, a link's target stays
    if (::unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      report.errors.push_back(describe(path, "unlink", errno));
      return false;
    }
    if (S_ISREG(st.st_mode)) report.bytes += static_cast<std::uint64_t>(st.st_size);
    return true;
  }
  if (depth >= kMaxDepth) {
    report.errors.push_back(path + ": deeper than " + std::to_string(kMaxDepth) +
                            " levels, not a tenax tier folder; left in place");
    return false;
  }
  UniqueFd dir(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) {
    if (errno == ENOENT) return true;  // removed meanwhile (two epilogs of one heterogeneous job on a node)
    report.errors.push_back(describe(path, "open", errno));
    return false;
  }
  std::vector<std::string> names;
  bool complete = list(dir.get(), path, names, report);
  // A tier folder's job-id goes last: a folder that could not be removed whole still names its job, for a later try.
  const bool tier_folder = depth == 0;
  for (const auto& child : names) {
    if (tier_folder && child == kLocalTierJobFile) continue;
    complete = remove_entry(dir.get(), path, child, depth + 1, report) && complete;
  }
  if (complete && tier_folder) complete = remove_entry(dir.get(), path, kLocalTierJobFile, depth + 1, report);
  if (!complete) return false;
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    report.errors.push_back(describe(path, "rmdir", errno));
    return false;
  }
  return true;
}

// The job id a tier folder names; "" when it has no readable job-id file.
std::string folder_job(int folder_fd, const std::string& path, LocalCleanupReport& report) {
  UniqueFd file(::openat(folder_fd, kLocalTierJobFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) {
    if (errno != ENOENT) report.errors.push_back(describe(path + "/" + kLocalTierJobFile, "open", errno));
    return "";
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  char buffer[kMaxJobIdLength + 2];
  const ssize_t got = ::read(file.get(), buffer, sizeof buffer);
  if (got <= 0) return "";
  std::string id(buffer, static_cast<std::size_t>(got));
  if (!id.empty() && id.back() == '\n') id.pop_back();
  if (id.size() > kMaxJobIdLength || id.find('\n') != std::string::npos) return "";
  return id;
}

enum class Holder { None, Living, Unknown };

// Whether a living process holds the tier folder (hold_local_tier_folder). On None, `lock` holds the folder's in-use
// file locked exclusively, when it has one, so that no process takes the folder up while it is being removed.
// Unknown: the file could not be examined (reported); the folder is kept.
Holder folder_holder(int folder_fd, const std::string& path, UniqueFd& lock, LocalCleanupReport& report) {
  const std::string file = path + "/" + kLocalTierInUseFile;
  // Read-write: where flock is emulated with byte-range locks (NFS), an exclusive lock needs a writable descriptor.
  lock = UniqueFd(::openat(folder_fd, kLocalTierInUseFile, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (lock.get() < 0 && errno == EACCES)
    lock = UniqueFd(::openat(folder_fd, kLocalTierInUseFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (lock.get() < 0) {
    if (errno == ENOENT || errno == ELOOP) return Holder::None;  // no file (an older tenax), or a link: removed as one
    report.errors.push_back(describe(file, "open", errno) + " (the folder is kept)");
    return Holder::Unknown;
  }
  struct stat st {};
  if (::fstat(lock.get(), &st) != 0) {
    report.errors.push_back(describe(file, "stat", errno) + " (the folder is kept)");
    return Holder::Unknown;
  }
  if (!S_ISREG(st.st_mode)) return Holder::None;  // nothing a rank made: the walk removes it
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) == 0) return Holder::None;
  if (errno == EWOULDBLOCK) return Holder::Living;
  // A file system without flock (none the tier is meant for): nothing can be known, the folder is the job's.
  report.errors.push_back(describe(file, "flock", errno) + " (removed anyway: it names the job)");
  return Holder::None;
}

// The in-use file `fd` is open on is still the one at `path` (a removal may have unlinked it in between).
bool still_linked(int fd, const std::string& path) {
  struct stat held {
  }, named{};
  return ::fstat(fd, &held) == 0 && held.st_nlink > 0 && ::lstat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

}  // namespace

int hold_local_tier_folder(const std::string& folder) {
  const std::string path = folder + "/" + kLocalTierInUseFile;
  // A removal holds the lock for as long as it takes to delete the folder; it is waited for, within a bound (its
  // process could be stuck in the kernel on a dead disk).
  constexpr int kTries = 500;
  constexpr long kPauseNs = 20'000'000;  // 20 ms: 10 s in all
  int error = EWOULDBLOCK;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    if (attempt > 0) {
      const timespec pause{0, kPauseNs};
      ::nanosleep(&pause, nullptr);
    }
    if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) return -1;
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
    if (fd.get() < 0) {
      if (errno == ENOENT) continue;  // the folder was removed between the two calls
      return -1;
    }
    // Only the job's user may lock it: another user holding it would keep the copies from ever being removed. A file
    // an older tenax made 0644 is narrowed (fails harmlessly when it is not ours).
    ::fchmod(fd.get(), 0600);
    if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
      error = errno;
      if (error == EWOULDBLOCK) continue;  // a removal is under way
      fd.reset();
      errno = error;
      return -1;
    }
    if (still_linked(fd.get(), path)) return fd.release();
    error = ESTALE;  // locked a file the removal had already unlinked: start over with the folder as it is now
  }
  errno = error;
  return -1;
}

std::string local_tier_folder_job(const std::string& folder) {
  UniqueFd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) return "";
  LocalCleanupReport ignored;
  return folder_job(dir.get(), folder, ignored);
}

int hold_existing_local_tier_folder(const std::string& folder, std::string_view job_id) {
  // Both files are read through one descriptor of the folder, so both come from the same directory; a link in the
  // folder's place is not followed (ELOOP or ENOTDIR), nor one in the in-use file's (ELOOP).
  UniqueFd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) return -1;
  UniqueFd fd(::openat(dir.get(), kLocalTierInUseFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return -1;
  const std::string path = folder + "/" + kLocalTierInUseFile;
  LocalCleanupReport ignored;
  int error = 0;
  struct stat st {};
  if (job_id.empty() || folder_job(dir.get(), folder, ignored) != job_id)
    error = EPERM;
  else if (::fstat(fd.get(), &st) != 0)
    error = errno;
  else if (!S_ISREG(st.st_mode))
    error = EINVAL;
  else if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0)
    error = errno;
  else if (!still_linked(fd.get(), path))
    error = ENOENT;  // a removal unlinked it after the open: the copies are gone or going
  if (error == 0) return fd.release();
  fd.reset();
  dir.reset();
  errno = error;  // as the failed call left it, not as close() may
  return -1;
}

std::string expand_node(const std::string& local_dir, const std::string& node) {
  std::string out;
  for (std::size_t i = 0; i < local_dir.size(); ++i) {
    if (local_dir[i] == '%' && i + 1 < local_dir.size() && local_dir[i + 1] == 'n') {
      out += node;
      ++i;
    } else {
      out += local_dir[i];
    }
  }
  return out;
}

bool is_local_tier_folder(std::string_view name) {
  const std::string_view prefix = kLocalTierPrefix;
  if (name.size() != prefix.size() + 16 || name.substr(0, prefix.size()) != prefix) return false;
  for (char c : name.substr(prefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

LocalCleanupReport remove_job_local_copies(const std::string& local_dir, std::string_view job_id) {
  return remove_job_local_copies(local_dir, std::vector<std::string>{std::string(job_id)});
}

LocalCleanupReport remove_job_local_copies(const std::string& local_dir, const std::vector<std::string>& job_ids) {
  LocalCleanupReport report;
  if (job_ids.empty()) {
    report.errors.push_back("no job id given; nothing removed");
    return report;
  }
  for (const std::string& job_id : job_ids) {
    if (job_id.empty() || job_id.size() > kMaxJobIdLength) {
      report.errors.push_back("job id '" + job_id.substr(0, kMaxJobIdLength) +
                              "' is empty or too long; nothing removed");
      return report;
    }
  }
  try {
    UniqueFd root(::open(local_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) {
      if (errno != ENOENT) report.errors.push_back(describe(local_dir, "open", errno));
      return report;
    }
    std::vector<std::string> names;
    if (!list(root.get(), local_dir, names, report)) return report;
    for (const auto& name : names) {
      if (!is_local_tier_folder(name)) continue;
      const std::string path = local_dir + "/" + name;
      UniqueFd folder(::openat(root.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (folder.get() < 0) continue;  // a link or a file with a tier folder's name: not ours to touch
      const std::string owner = folder_job(folder.get(), path, report);
      if (std::find(job_ids.begin(), job_ids.end(), owner) == job_ids.end()) {
        ++report.kept;
        continue;
      }
      UniqueFd lock;
      const Holder holder = folder_holder(folder.get(), path, lock, report);
      if (holder == Holder::Living) report.in_use.push_back(path);
      if (holder != Holder::None) continue;
      if (remove_entry(root.get(), local_dir, name, 0, report)) ++report.removed;
    }
  } catch (const std::exception& e) {  // allocation failure: report, never throw into the caller (an epilog)
    report.errors.push_back(local_dir + ": " + e.what());
  }
  return report;
}

}  // namespace tenax::ckpt
