// tenax-launch's command line. Every option is checked here, before anything starts; a bad one throws UsageError
// naming the option, the value and what is allowed.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tenax::launch {

enum class Mode { Auto, Local, Slurm };

struct Options {
  Mode mode = Mode::Auto;
  int ranks = 0;                            // total ranks; 0 = Slurm: nodes x tasks per node; local: required
  int nodes = 0;                            // Slurm: nodes per attempt; 0 = allocation minus spares
  int tasks_per_node = 0;                   // Slurm: 0 = let srun spread `ranks`
  int spare_nodes = 0;                      // Slurm: allocated nodes held back to replace bad ones
  int max_restarts = 3;                     // relaunches after failures (preemptions do not count)
  int no_progress_limit = 3;                // stop after this many consecutive failed attempts without progress
  int bad_node_strikes = 2;                 // failures blamed on a node before it is excluded (node loss: at once)
  std::chrono::milliseconds backoff{1000};  // first wait before a relaunch; doubles each time
  std::chrono::milliseconds backoff_max{60000};
  std::chrono::milliseconds hang_timeout{0};  // 0 = derived from observed step times (unless detect_hangs is off)
  bool detect_hangs = true;                   // --hang-timeout 0: no silence or stall verdicts once the ranks run
  std::chrono::milliseconds hang_timeout_min{30000};
  double hang_factor = 10;                            // derived timeout = factor x slowest step seen
  std::chrono::milliseconds startup_timeout{600000};  // until the first step of an attempt
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds kill_grace{3000};       // SIGTERM -> SIGKILL when tearing an attempt down
  std::chrono::milliseconds preempt_grace{120000};  // time the workers get for the emergency checkpoint
  bool elastic = false;                             // allow shrinking data parallelism when nodes run out
  int min_nodes = 1;                                // elastic: never fewer
  int model_parallel = 1;  // elastic: ranks per data-parallel replica (world size stays a multiple)
  bool requeue = true;     // Slurm: `scontrol requeue` after preemption
  std::string run_dir = "tenax-run";
  std::string checkpoint_dir;
  std::string mpirun = "mpirun";
  std::string srun = "srun";
  std::string scontrol = "scontrol";
  std::string srun_mpi = "pmix";
  std::vector<std::string> extra_launcher_args;  // --launcher-arg, passed to mpirun/srun verbatim
  std::vector<std::string> program;              // PROGRAM [ARGS...]
};

struct ParseResult {
  std::optional<Options> options;  // empty when --help / --help-env was answered
  std::string text;                // what to print for --help / --help-env
};

// Parses argv (argv[0] is the launcher). Throws UsageError.
ParseResult parse_options(int argc, const char* const* argv);

// Finds `name` the way execvp would (PATH search when it has no '/'); "" when not found, not executable or not a
// regular file (a directory passes access(X_OK) but cannot be run).
std::string find_executable(const std::string& name);

}  // namespace tenax::launch
