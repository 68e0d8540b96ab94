#include "processes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

[[noreturn]] void sys_fail(const std::string& what) {
  throw Error(what + " failed: " + std::strerror(errno));
}

// Parent pid and state from /proc/<pid>/stat ("pid (comm) S ppid ..."; comm may contain spaces and parentheses).
bool read_stat(pid_t pid, pid_t& parent, char& state) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 4 > text.size()) return false;
  std::istringstream rest(text.substr(close + 2));
  long ppid = 0;
  rest >> state >> ppid;
  parent = static_cast<pid_t>(ppid);
  return static_cast<bool>(rest);
}

void make_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) sys_fail("pipe2");
}

}  // namespace

void become_subreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) sys_fail("prctl(PR_SET_CHILD_SUBREAPER)");
}

Spawned spawn(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
              const std::vector<std::pair<std::string, std::string>>& env_defaults) {
  int out[2], err[2], status[2];
  make_pipe(out);
  make_pipe(err);
  make_pipe(status);  // carries errno when exec fails; closed by a successful exec (CLOEXEC)

  // Everything the child needs is prepared before fork: after fork only async-signal-safe calls are allowed.
  std::map<std::string, std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) environment[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : env_defaults)
    environment.emplace(key, value);
  for (const auto& [key, value] : env)
    environment[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : environment)
    env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args)
    argp.push_back(a.data());
  argp.push_back(nullptr);

  const pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0) sys_fail("fork");
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a signal aimed at the launcher's terminal group does not hit it twice
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int signo : {SIGTERM, SIGUSR1, SIGINT, SIGCHLD, SIGPIPE, SIGHUP})
      signal(signo, SIG_DFL);
    // After the signal dispositions are reset (a SIGTERM must not reach the launcher's own handler here): the
    // launcher's death, even by SIGKILL or the OOM killer, must not leave an attempt running unsupervised: its
    // ranks would go on writing checkpoints while the next launcher's attempt writes the same ones. mpirun and srun
    // get SIGTERM then, which they pass to the ranks (an emergency checkpoint, as for a preemption). The signal is
    // tied to the forking thread; tenax-launch forks only from its main thread, which lives as long as it does.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) _exit(127);  // the launcher died before prctl took effect
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execvpe(argp[0], argp.data(), envp.data());
    int code = errno;
    ssize_t ignored = write(status[1], &code, sizeof code);
    (void)ignored;
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  close(status[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(status[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  close(status[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    throw Error("cannot start '" + argv.front() + "': " + std::strerror(exec_errno));
  }
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
  return {pid, out[0], err[0]};
}

std::vector<pid_t> descendants() {
  std::map<pid_t, std::vector<pid_t>> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) sys_fail("opendir(/proc)");
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    pid_t parent = 0;
    char state = 0;
    if (read_stat(static_cast<pid_t>(pid), parent, state) && state != 'Z' && state != 'X') {
      children[parent].push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  std::vector<pid_t> out;
  std::vector<pid_t> frontier = {getpid()};
  while (!frontier.empty()) {
    pid_t next = frontier.back();
    frontier.pop_back();
    for (pid_t child : children[next]) {
      out.push_back(child);
      frontier.push_back(child);
    }
  }
  return out;
}

int signal_descendants(int signo) {
  int count = 0;
  for (pid_t pid : descendants()) {
    if (kill(pid, signo) == 0) ++count;
  }
  return count;
}

bool process_alive(pid_t pid) {
  pid_t parent = 0;
  char state = 0;
  if (!read_stat(pid, parent, state)) return false;
  return state != 'Z' && state != 'X';
}

std::vector<Reaped> reap_exited() {
  std::vector<Reaped> out;
  while (true) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    out.push_back({pid, status});
  }
  return out;
}

CommandResult run_command(const std::vector<std::string>& argv, std::size_t output_limit,
                          std::chrono::milliseconds time_limit) {
  using Clock = std::chrono::steady_clock;
  Spawned child = spawn(argv, {}, {});
  CommandResult result;
  const auto deadline = Clock::now() + time_limit;
  auto drain_deadline = Clock::time_point::max();  // after the kill: how long a pipe may stay open
  int fds_open[2] = {child.stdout_fd, child.stderr_fd};
  std::string* sinks[2] = {&result.out, &result.err};
  char buffer[4096];
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    const auto now = Clock::now();
    if (!result.timed_out && now >= deadline) {
      result.timed_out = true;
      kill(-child.pid, SIGKILL);  // its own process group: what it started goes too
      drain_deadline = now + std::chrono::seconds(1);
    }
    if (now >= drain_deadline) {
      // A descendant that left the group still holds a pipe: stop listening to it.
      for (int& fd : fds_open) {
        if (fd >= 0) close(fd);
        fd = -1;
      }
    }
    if (fds_open[0] < 0 && fds_open[1] < 0) {
      // Both pipes closed: wait for the exit, still bounded by the time limit (it may have closed them and hung).
      pid_t done = waitpid(child.pid, &status, result.timed_out ? 0 : WNOHANG);
      if (done == child.pid) {
        reaped = true;
      } else if (done < 0 && errno != EINTR) {
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    pollfd fds[2] = {{fds_open[0], POLLIN, 0}, {fds_open[1], POLLIN, 0}};  // poll ignores a negative fd
    if (poll(fds, 2, 50) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds_open[i] < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds_open[i], buffer, sizeof buffer);
      if (n > 0) {
        // Bounded: a command that floods its output must not fill the launcher's memory; the rest is read and dropped.
        const std::size_t room = output_limit - std::min(output_limit, sinks[i]->size());
        const auto got = static_cast<std::size_t>(n);
        sinks[i]->append(buffer, std::min(room, got));
        if (got > room) result.truncated = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fds_open[i]);
        fds_open[i] = -1;
      }
    }
  }
  for (int fd : fds_open) {
    if (fd >= 0) close(fd);
  }
  if (!reaped) {
    kill(-child.pid, SIGKILL);
    while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace tenax::launch
