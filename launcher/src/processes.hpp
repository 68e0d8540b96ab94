// Starting, watching and killing the attempt's processes.
//
// The launcher makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): Open MPI puts every rank in its own
// process group, so killing mpirun's group would miss them, and a rank orphaned by a dead mpirun would otherwise
// escape to init. As subreaper, every process started for an attempt stays a descendant of the launcher, is found by
// walking /proc, is killed with its whole tree, and is reaped here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace tenax::launch {

void become_subreaper();

struct Spawned {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends of the child's stdout / stderr (non-blocking, close-on-exec)
  int stderr_fd = -1;
};

// fork + exec `argv` in a new process group with `env` added to (and `env_defaults` filling gaps in) this environment,
// default signal dispositions and an empty signal mask; the child gets SIGTERM when the calling thread (the launcher's
// main thread) dies. Throws Error with the exec failure (e.g. not found).
Spawned spawn(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
              const std::vector<std::pair<std::string, std::string>>& env_defaults);

// Every live descendant of this process (children first), from /proc.
std::vector<pid_t> descendants();

// Sends `signo` to every descendant; returns how many were signalled.
int signal_descendants(int signo);

// True while `pid` exists and is not a zombie.
bool process_alive(pid_t pid);

struct Reaped {
  pid_t pid;
  int status;  // as from waitpid
};
// Reaps every child that has exited, without blocking.
std::vector<Reaped> reap_exited();

struct CommandResult {
  int exit_code = -1;      // its exit status; -1 when it did not exit by itself
  int signal = 0;          // the signal that ended it, 0 when none
  bool timed_out = false;  // killed with SIGKILL after the time limit
  std::string out, err;    // what it wrote to stdout and to stderr, each cut at the output limit
  bool truncated = false;  // more output was written (and dropped)
  bool ok() const { return exit_code == 0; }
};

// Runs a short command (scontrol) to completion in its own process group: stdout and stderr captured separately, each
// bounded by `output_limit` bytes; the group is killed after `time_limit` (a hung slurmctld must not hold the
// launcher past a preemption's grace). Throws Error when it cannot be started (e.g. not found).
CommandResult run_command(const std::vector<std::string>& argv, std::size_t output_limit,
                          std::chrono::milliseconds time_limit);

}  // namespace tenax::launch
