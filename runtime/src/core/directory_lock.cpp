#include "directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>

#include "core/host_name.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

constexpr std::size_t kHolderBytes = 512;  // a holder line is about 80 bytes; more is not a holder line
constexpr int kMaxRelinks = 100;           // the file replaced under us this often: someone keeps removing it
constexpr auto kPollPause = std::chrono::milliseconds(100);

// The lock file `fd` is open on is still the one at `path` (a launcher taking over, or a person, may have removed it).
bool still_linked(int fd, const std::string& path) {
  struct stat held {
  }, named{};
  return ::fstat(fd, &held) == 0 && held.st_nlink > 0 && ::lstat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

std::string seconds_text(std::chrono::milliseconds wait) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(wait.count()) / 1000);
  return text;
}

std::string now_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  char text[32] = "unknown";
  if (::gmtime_r(&now, &utc) != nullptr) std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// key=value fields of a holder line. The file is anyone's to write: values are kept only when short and made of the
// characters a pid, host name, job id or time has, so nothing else reaches a message or a terminal.
std::map<std::string, std::string> holder_fields(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || word.size() - eq - 1 > 64) continue;
    const std::string value = word.substr(eq + 1);
    bool plain = !value.empty();
    for (const char c : value)
      plain = plain && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                        c == '-' || c == '_' || c == ':');
    if (plain) fields[word.substr(0, eq)] = value;
  }
  return fields;
}

std::string read_holder(int fd) {
  char buffer[kHolderBytes];
  const ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
}

// A count written as plain decimal digits; anything else (missing, negative, too large): 0, as on a first run.
int non_negative(const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && value >= 0 ? value : 0;
}

bool is_program(const std::map<std::string, std::string>& fields) {
  const auto role = fields.find("role");
  return role != fields.end() && role->second == "program";
}

// A checkpointer of this very process holds the lock (two Engines on one directory).
bool same_program(const std::string& line) {
  auto fields = holder_fields(line);
  return is_program(fields) && fields["pid"] == std::to_string(::getpid()) && fields["host"] == detail::host_name();
}

// "tenax-launch (pid 12 on host n1, Slurm job 345, started ...)" or "a training program (its rank 0: pid ...)".
std::string describe_holder(const std::string& line) {
  auto fields = holder_fields(line);
  const bool program = is_program(fields);
  if (same_program(line)) return "another checkpointer (another Engine) of this very program, pid " + fields["pid"];
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (fields.count("pid")) add("pid " + fields["pid"] + (fields.count("host") ? " on host " + fields["host"] : ""));
  if (fields.count("job")) add("Slurm job " + fields["job"]);
  if (fields.count("since")) add("started " + fields["since"]);
  // An empty line: a holder that has not written it yet (it took the lock a moment ago), or one that could not.
  if (out.empty()) return "another run (its lock file does not say which)";
  return program ? "a training program (its rank 0: " + out + ")" : "another tenax-launch (" + out + ")";
}

std::string holder_identity(const std::string& line) {
  auto fields = holder_fields(line);
  return fields["host"] + ":" + fields["pid"];
}

// Records who holds the lock. Best effort: the lock is held either way, and a full disk is reported by the ledger's
// first write, which follows at once.
void write_holder(int fd, const LockOwner& self) {
  const std::string line = lock_holder_line(self);
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, line.data(), line.size(), 0);
}

// Directories that writers of this process work in under an admitted holder: they hold no flock of their own, which
// would keep a second one out (two Engines of one program on one checkpoint directory).
std::mutex g_claims_mutex;
std::set<std::pair<dev_t, ino_t>> g_claims;

std::shared_ptr<void> claim_in_this_process(const std::string& dir, const std::string& option, const std::string& fix) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return nullptr;  // gone meanwhile: the writer's own steps will say so
  const std::pair<dev_t, ino_t> key{st.st_dev, st.st_ino};
  const std::lock_guard<std::mutex> guard(g_claims_mutex);
  if (!g_claims.insert(key).second)
    throw UsageError(option + " '" + dir +
                     "' is in use by another checkpointer (another Engine) of this very program: one checkpointer "
                     "saves into a directory at a time. Let the other go first (its destructor releases the "
                     "directory), or " +
                     fix);
  return std::shared_ptr<void>(nullptr, [key](void*) {
    const std::lock_guard<std::mutex> erase_guard(g_claims_mutex);
    g_claims.erase(key);
  });
}

}  // namespace

std::string lock_holder_line(const LockOwner& self) {
  std::string line = "pid=" + std::to_string(::getpid()) + " host=" + detail::host_name() +
                     (self.role == LockRole::Program ? " role=program" : " role=launcher");
  if (!self.job_id.empty()) line += " job=" + self.job_id + " restart=" + std::to_string(self.restart_count);
  if (!self.launcher.empty()) line += " launcher=" + self.launcher + " attempt=" + std::to_string(self.attempt);
  return line + " since=" + now_utc() + "\n";
}

LockOwner parse_lock_holder(const std::string& line) {
  auto fields = holder_fields(line);
  LockOwner owner;
  owner.job_id = fields["job"];
  owner.restart_count = non_negative(fields["restart"]);
  owner.role = is_program(fields) ? LockRole::Program : LockRole::Launcher;
  owner.launcher = fields["launcher"];
  owner.attempt = non_negative(fields["attempt"]);
  return owner;
}

LockOwner lock_owner_from_environment(LockRole role) {
  auto variable = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  LockOwner owner;
  owner.role = role;
  owner.job_id = variable("SLURM_JOB_ID");
  owner.restart_count = non_negative(variable("SLURM_RESTART_COUNT"));
  if (role == LockRole::Program) {
    owner.launcher = variable("TENAX_LAUNCHER");
    owner.attempt = non_negative(variable("TENAX_ATTEMPT"));
  }
  return owner;
}

std::string lock_holder_identity() {
  return detail::host_name() + ":" + std::to_string(::getpid());
}

std::string DirectoryLock::renew(const LockOwner& self) {
  if (!fd_.valid() || still_linked(fd_.get(), dir_ + "/" + kLaunchLockFile)) return "";
  std::error_code error;
  std::filesystem::create_directories(dir_, error);  // the programs make it again too; the lock needs it first
  DirectoryLock again = take(dir_, use_, self, std::chrono::milliseconds(0));
  const std::string option = use_.option, dir = dir_;
  *this = std::move(again);
  return option + " '" + dir + "': its lock file " + dir + "/" + kLaunchLockFile +
         " was removed while this run held it (the directory removed or emptied by hand?); it is locked again";
}

DirectoryLock DirectoryLock::take(const std::string& dir, const LockUse& use, const LockOwner& self,
                                  std::chrono::milliseconds earlier_run_wait) {
  const std::string& option = use.option;
  const std::string path = dir + "/" + kLaunchLockFile;
  const auto deadline = std::chrono::steady_clock::now() + earlier_run_wait;
  std::string taken_over;           // the holder description of an earlier run whose lock was taken over
  bool taken_from_attempt = false;  // that run was an earlier attempt under the same launcher (else: job run)
  for (int relinks = 0;;) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644));
    if (!fd.valid()) {
      const int error = errno;
      if (error == EROFS || ((error == EACCES || error == EPERM) && ::access(path.c_str(), F_OK) != 0))
        throw UsageError(option + " '" + dir + "' is not writable (creating " + path +
                         " failed: " + std::strerror(error) + "): give a directory this user can write");
      throw UsageError(option + " '" + dir + "': its lock file " + path + " cannot be opened (" + std::strerror(error) +
                       "); it keeps a second run out of the directory. Make it a regular file this user can write (or "
                       "remove it), or " +
                       use.fix);
    }
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      if (!still_linked(fd.get(), path)) {
        // Removed between our open and our lock (by a launcher taking over, or by hand): lock the file there now.
        if (++relinks > kMaxRelinks) throw IoError(path + " keeps being removed while this process locks it");
        continue;
      }
      write_holder(fd.get(), self);
      DirectoryLock lock;
      lock.fd_ = std::move(fd);
      lock.dir_ = dir;
      lock.use_ = use;
      if (!taken_over.empty())
        lock.warning_ = option + " '" + dir + "' was still locked by " + taken_over +
                        (taken_from_attempt
                             ? ", an earlier attempt of this run, after a wait of " + seconds_text(earlier_run_wait) +
                                   "; tenax-launch ended that attempt before starting this one (a rank on a lost "
                                   "node may linger), so its lock is taken over"
                             : ", an earlier run of this Slurm job, after a wait of " + seconds_text(earlier_run_wait) +
                                   "; Slurm ended that run before requeueing the job, so its lock is taken over");
      return lock;
    }
    const int error = errno;
    if (error != EWOULDBLOCK) {
      // ENOLCK, EOPNOTSUPP, ENOSYS: a file system that keeps no locks. Refusing to run there would be worse.
      DirectoryLock unlocked;
      unlocked.warning_ = option + " '" + dir + "' cannot be locked (flock: " + std::strerror(error) +
                          "); nothing keeps a second run out of it: start one run per directory";
      return unlocked;
    }
    const std::string holder = read_holder(fd.get());
    const LockOwner owner = parse_lock_holder(holder);
    const bool older_launcher = use.admit_older_launcher && !holder.empty() && holder_fields(holder).count("role") == 0;
    if (owner.role == LockRole::Launcher &&
        ((!use.admitted_holder.empty() && holder_identity(holder) == use.admitted_holder) || older_launcher)) {
      DirectoryLock admitted;
      admitted.admitted_ = true;
      admitted.admitted_claim_ = claim_in_this_process(dir, option, use.fix);
      return admitted;
    }
    const bool earlier_job_run =
        !self.job_id.empty() && owner.job_id == self.job_id && owner.restart_count < self.restart_count;
    const bool earlier_attempt = self.role == LockRole::Program && owner.role == LockRole::Program &&
                                 !self.launcher.empty() && owner.launcher == self.launcher &&
                                 owner.attempt < self.attempt;
    const bool earlier_run = earlier_job_run || earlier_attempt;
    if (!earlier_run) {
      if (same_program(holder))
        throw UsageError(option + " '" + dir + "' is in use by " + describe_holder(holder) +
                         ": one checkpointer saves into a directory at a time. Let the other go first (its "
                         "destructor releases the directory), or " +
                         use.fix);
      const bool launchers = owner.role == LockRole::Launcher && self.role == LockRole::Launcher;
      throw UsageError(option + " '" + dir + "' is in use by " + describe_holder(holder) + ": " +
                       (launchers ? "two launchers in one directory would mix their ledgers, heartbeats and checkpoints"
                                  : "two runs saving into one checkpoint directory would remove each other's "
                                    "unfinished checkpoints and mix their steps") +
                       ". Wait for that run to end, or " + use.fix + ". If that " +
                       (owner.role == LockRole::Launcher ? "launcher" : "program") +
                       " is gone for good (its host lost while holding the lock), remove " + path + " and start again");
    }
    if (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(kPollPause);
      continue;
    }
    // The earlier run's lock outlived its wait: unlink its file (if it is still the one there) and lock a new one.
    taken_over = describe_holder(holder);
    taken_from_attempt = !earlier_job_run;
    if (still_linked(fd.get(), path) && ::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw UsageError(option + " '" + dir + "' is still locked by " + taken_over + ", an earlier " +
                       (taken_from_attempt ? "attempt of this run" : "run of this Slurm job") + ", and its lock file " +
                       path + " cannot be removed (" + std::strerror(errno) + "): remove it, or " + use.fix);
  }
}

}  // namespace tenax
