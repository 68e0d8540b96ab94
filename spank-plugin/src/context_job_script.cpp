// Job script context (slurmd's job epilog, as root, on every node of the job once it has ended): removes the job's
// node-local checkpoint copies, so that /dev/shm or a local disk is not left full and a requeued job never finds stale
// copies on a node it left (checkpoint/local_tier_cleanup.hpp says which folders are the job's).
//
// The directory is the job's (SPANK_TENAX_CKPT_LOCAL_DIR, which the allocator context put in the job control
// environment) or the site default, both patterns a user controls in part. Root never walks it: a child process
// becomes the job's user (groups, gid, uid) and removes what the user could remove anyway; symbolic links are never
// followed. Nothing here may fail the epilog (a failed epilog drains the node), so every problem is logged and the
// callback returns 0 — also when the removal does not finish: Slurm kills an epilog that runs past
// max(PrologEpilogTimeout, 120 s) and drains the node, and a directory on a hung mount, or a folder of millions of
// files, would take that long. The child gets kRemovalDeadline; then it is killed and the rest is left in place.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "checkpoint/local_tier_cleanup.hpp"
#include "contexts.hpp"
#include "epilog_job_ids.hpp"
#include "plugin_state.hpp"
#include "tenax/error.hpp"

namespace tenax::spank::job_script {

namespace {

constexpr std::chrono::seconds kRemovalDeadline{30};

struct JobUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::vector<gid_t> groups;  // looked up here: no name-service lookup after fork
};

JobUser job_user(uid_t uid) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    throw Error("user id " + std::to_string(uid) + " has no passwd entry on this node");
  }
  JobUser user{uid, entry.pw_gid, entry.pw_name, {}};
  int count = 64;
  for (int tries = 0; tries < 8; ++tries) {
    user.groups.resize(static_cast<std::size_t>(count));
    int got = count;
    if (::getgrouplist(user.name.c_str(), user.gid, user.groups.data(), &got) >= 0) {
      user.groups.resize(static_cast<std::size_t>(got));
      return user;
    }
    count = std::max(got, count * 2);
  }
  throw Error("could not list the groups of user " + user.name);
}

void write_text(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// In the child: drop to the job's user for good, remove, and write the report as lines (per directory "removed N BYTES
// DIR", then "inuse PATH" per folder a living process holds and one line per error) to `out`. Returns the exit
// status.
int remove_as_user(const JobUser& user, const std::vector<std::string>& dirs, const std::vector<std::string>& job_ids,
                   int out) {
  if (::geteuid() == 0 && user.uid != 0) {
    if (::setgroups(user.groups.size(), user.groups.data()) != 0 || ::setgid(user.gid) != 0 ||
        ::setuid(user.uid) != 0) {
      write_text(out, "error could not become user " + user.name + ": " + std::strerror(errno) + "\n");
      return 2;
    }
    if (::setuid(0) == 0) {  // privileges must be gone for good before any user-controlled path is touched
      write_text(out, "error could regain root after dropping to " + user.name + "\n");
      return 2;
    }
  }
  for (const std::string& dir : dirs) {
    const ckpt::LocalCleanupReport report = ckpt::remove_job_local_copies(dir, job_ids);
    std::string text =
        "removed " + std::to_string(report.removed) + " " + std::to_string(report.bytes) + " " + dir + "\n";
    for (const auto& path : report.in_use)
      text += "inuse " + path + "\n";
    for (const auto& error : report.errors)
      text += "error " + error + "\n";
    write_text(out, text);
  }
  return 0;
}

// The directory pattern of the job: its own (from sbatch/srun, through the job control environment), else the site's.
std::string local_dir_pattern(const AdminConfig& admin) {
  const char* job = std::getenv("SPANK_TENAX_CKPT_LOCAL_DIR");
  if (job != nullptr && *job != '\0') return parse_ckpt_local_dir("SPANK_TENAX_CKPT_LOCAL_DIR", job);
  return admin.ckpt_local_default;
}

void remove_local_copies(spank_t sp) {
  if (!state().admin_error.empty()) throw Error(state().admin_error);
  const std::string pattern = local_dir_pattern(state().admin);
  if (pattern.empty() || pattern == kNoLocalDir) return;
  const auto job_id = std::to_string(item_u32(sp, S_JOB_ID, "S_JOB_ID"));
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) throw Error("spank_get_item(S_JOB_UID) failed");
  const char* node = std::getenv("SLURMD_NODENAME");  // set by slurmd for prolog and epilog
  if (node == nullptr || *node == '\0') throw Error("SLURMD_NODENAME is not set in the epilog's environment");
  const JobUser user = job_user(uid);
  const std::string dir = expand_dir_pattern("node-local checkpoint directory", pattern, user.name, job_id, node);
  // The leader's id too, in a heterogeneous job: tenax-launch names every component's copies after it.
  const EpilogJobIds named = epilog_job_ids(job_id, std::getenv("SLURM_HET_JOB_ID"));
  if (!named.problem.empty()) report_error(named.problem);
  const std::vector<std::string>& job_ids = named.ids;
  // A pattern with %j names a directory per id: the ranks may have expanded it with the leader's.
  std::vector<std::string> dirs{dir};
  for (const std::string& id : job_ids) {
    std::string other = expand_dir_pattern("node-local checkpoint directory", pattern, user.name, id, node);
    if (std::find(dirs.begin(), dirs.end(), other) == dirs.end()) dirs.push_back(std::move(other));
  }

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw Error(std::string("fork: ") + std::strerror(errno));
  }
  if (child == 0) {
    ::close(pipe_fds[0]);
    int status = 3;
    try {
      status = remove_as_user(user, dirs, job_ids, pipe_fds[1]);
    } catch (...) {
    }
    ::_exit(status);
  }
  ::close(pipe_fds[1]);
  // The report, until the child closes its end, the report is too long or the deadline passes.
  std::string text;
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + kRemovalDeadline;
  bool timed_out = false;
  while (text.size() < (1u << 20)) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the loop head finds the deadline passed
    if (ready < 0) break;
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  const std::string where = "job " + job_id + " on " + node + ": ";
  int status = 0;
  if (timed_out) {
    // A child blocked in the kernel (a hung mount) may not die at once: it is not waited for; init reaps it when this
    // short-lived epilog process exits.
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, WNOHANG);
    report_error(where + "removing the node-local checkpoint copies under " + dir + " took longer than " +
                 std::to_string(kRemovalDeadline.count()) + " s; stopped, the rest is left in place");
  } else {
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }

  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("removed ", 0) == 0) {
      // "removed N BYTES DIR" (DIR may hold spaces: it is the rest of the line).
      const std::string counts = line.substr(8);
      const auto space = counts.find(' ');
      const auto second = space == std::string::npos ? std::string::npos : counts.find(' ', space + 1);
      if (second != std::string::npos && counts.substr(0, space) != "0") {
        log_info(where + "removed " + counts.substr(0, space) + " node-local checkpoint folder(s) (" +
                 counts.substr(space + 1, second - space - 1) + " bytes) from " + counts.substr(second + 1));
      }
    } else if (line.rfind("inuse ", 0) == 0) {
      // In a heterogeneous job, another component on this node still running: its own epilog removes the folder.
      // Otherwise every process of the job is gone, and the holder outlived it: the folder stays, which is news.
      const std::string left = where + "left the node-local checkpoint folder " + line.substr(6) + ": ";
      if (job_ids.size() > 1) {
        log_info(left + "a process holds it (another component of this heterogeneous job, whose epilog removes it)");
      } else {
        report_error(left +
                     "a process still holds it after the job ended (stuck, or a child the job left behind); "
                     "it stays until that process is gone and the folder is removed by hand");
      }
    } else if (line.rfind("error ", 0) == 0) {
      report_error(where + "node-local checkpoint copies: " + line.substr(6));
    }
  }
  if (!timed_out && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    report_error(where + "removing the node-local checkpoint copies under " + dir + " did not finish (status " +
                 std::to_string(status) + ")");
  }
}

}  // namespace

int job_epilog(spank_t sp) noexcept {
  try {
    remove_local_copies(sp);
  } catch (const std::exception& e) {
    report_error(std::string("job epilog: ") + e.what() + " (the node-local checkpoint copies were left in place)");
  } catch (...) {
    report_error("job epilog: unexpected non-standard exception (the node-local checkpoint copies were left in place)");
  }
  return 0;
}

}  // namespace tenax::spank::job_script
