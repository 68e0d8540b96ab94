#include "options.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cxxopts.hpp>
#include <sstream>

#include "attempt_plan.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

constexpr const char* kUsageLine = "tenax-launch [options] -- PROGRAM [ARGS...]";

cxxopts::Options make_parser() {
  cxxopts::Options parser("tenax-launch",
                          "Starts PROGRAM on every rank, watches it, and brings the run back from its newest "
                          "checkpoint after a crash, a hang or a lost node.\n"
                          "Local mode starts the ranks with mpirun on this machine; Slurm mode (inside an allocation, "
                          "SLURM_JOB_ID set) starts each attempt as an srun job step.\n"
                          "Exit codes: 0 done, 64 usage error, 75 preempted (resume by running the same command), "
                          "70 gave up after --max-restarts, 71 restart loop (no progress).");
  parser.custom_help("[options] -- PROGRAM [ARGS...]");
  // Every value is read as a string and converted below, so that a bad value is reported with its option's name.
  parser.add_options("Ranks and placement")(
      "n,ranks", "Total number of ranks (local mode: required; Slurm: default nodes x tasks per node)",
      cxxopts::value<std::string>())(
      "N,nodes", "Slurm: nodes per attempt (default: the allocation minus --spare-nodes)",
      cxxopts::value<std::string>())("tasks-per-node", "Slurm: ranks on each node", cxxopts::value<std::string>())(
      "spare-nodes", "Slurm: allocated nodes kept in reserve to replace excluded ones", cxxopts::value<std::string>())(
      "mode", "local, slurm or auto (slurm when SLURM_JOB_ID is set)", cxxopts::value<std::string>());
  parser.add_options("Restarts")("max-restarts",
                                 "Relaunches after failures before giving up (preemptions do not count) [3]",
                                 cxxopts::value<std::string>())(
      "no-progress-limit",
      "Stop after this many consecutive failed attempts that commit no new checkpoint (without --checkpoint-dir: "
      "that reach no new highest step) [3]",
      cxxopts::value<std::string>())("backoff",
                                     "Wait before relaunching after a failed attempt that committed no new checkpoint; "
                                     "doubles with each such attempt in a row (an attempt that committed one is "
                                     "relaunched at once) [1s]",
                                     cxxopts::value<std::string>())(
      "backoff-max", "Longest wait between relaunches [60s]", cxxopts::value<std::string>())(
      "bad-node-strikes",
      "Slurm: failures blamed on a node before it is excluded; a lost node is excluded at once "
      "[2]",
      cxxopts::value<std::string>())("elastic",
                                     "Slurm: when healthy nodes run out, shrink data parallelism instead of giving up")(
      "min-nodes", "Elastic: never run on fewer nodes [1]", cxxopts::value<std::string>())(
      "model-parallel", "Elastic: ranks per data-parallel replica; the world size stays a multiple of it [1]",
      cxxopts::value<std::string>())("no-requeue", "Slurm: do not run `scontrol requeue` after a preemption");
  parser.add_options("Failure detection")(
      "hang-timeout",
      "A rank silent, or no step completed, for this long is a hang (e.g. 90s; default: derived from observed step "
      "times); 0 disables hang detection (--startup-timeout still bounds the time to the first step)",
      cxxopts::value<std::string>())("hang-timeout-min", "Smallest derived hang timeout [30s]",
                                     cxxopts::value<std::string>())(
      "hang-factor", "Derived hang timeout = this x the slowest step seen [10]", cxxopts::value<std::string>())(
      "startup-timeout", "Longest time from launch to the first completed step of an attempt [10m]",
      cxxopts::value<std::string>())("heartbeat-interval", "How often each rank writes its heartbeat [1s]",
                                     cxxopts::value<std::string>())(
      "kill-grace", "SIGTERM -> SIGKILL delay when killing an attempt [3s]", cxxopts::value<std::string>())(
      "preempt-grace", "Time the workers get to take the emergency checkpoint after a preemption signal [120s]",
      cxxopts::value<std::string>());
  parser.add_options("Files and programs")(
      "run-dir", "Directory for heartbeats, the ledger and the bad-node list; reuse it to resume [tenax-run]",
      cxxopts::value<std::string>())("checkpoint-dir",
                                     "Checkpoint directory, passed to the program as TENAX_CHECKPOINT_DIR ('none': no "
                                     "checkpoints, as for the program)",
                                     cxxopts::value<std::string>())("mpirun", "Local mode: the mpirun to use [mpirun]",
                                                                    cxxopts::value<std::string>())(
      "srun", "Slurm mode: the srun to use [srun]", cxxopts::value<std::string>())(
      "scontrol", "Slurm mode: the scontrol to use [scontrol]", cxxopts::value<std::string>())(
      "srun-mpi", "Slurm mode: srun --mpi plugin [pmix]", cxxopts::value<std::string>())(
      "launcher-arg", "Extra argument for mpirun/srun (repeatable)", cxxopts::value<std::vector<std::string>>());
  parser.add_options("Help")("h,help", "Print this help")("help-env", "List every TENAX_* environment variable");
  return parser;
}

int int_option(const cxxopts::ParseResult& parsed, const std::string& name, int fallback, long long min,
               long long max) {
  if (!parsed.count(name)) return fallback;
  return static_cast<int>(env::parse_int("--" + name, parsed[name].as<std::string>(), min, max));
}

// `zero_means`: what 0 does for this option ("" when 0 is refused), for the help-like hint of an error.
std::chrono::milliseconds duration_option(const cxxopts::ParseResult& parsed, const std::string& name,
                                          std::chrono::milliseconds fallback, const std::string& zero_means) {
  if (!parsed.count(name)) return fallback;
  const std::string text = parsed[name].as<std::string>();
  const std::string expected = "expected a duration such as 90s, 500ms, 5m or 1h, at most 1000000h" +
                               (zero_means.empty() ? std::string(" and longer than 0") : "; 0 " + zero_means);
  std::chrono::milliseconds value;
  try {
    value = env::parse_duration("--" + name, text);
  } catch (const UsageError& e) {
    // A positive value under 1 ms only rounds to 0: a mistake, not a request for 0 (the parser refuses it).
    const std::string why = e.what();
    const bool rounds_to_zero = why.find("shorter than 1ms") != std::string::npos;
    const bool too_long = why.find("too long") != std::string::npos;
    throw UsageError("--" + name + "='" + text + "' " +
                     (rounds_to_zero ? "rounds to 0 ms"
                      : too_long     ? "is too long"
                                     : "is not valid") +
                     ": " + expected);
  }
  if (value.count() == 0) {
    // "0", "0s", "0.0ms" mean 0; "0.0001s" only rounds to it, which is a mistake rather than a request for 0.
    const bool literal_zero = std::strtod(text.c_str(), nullptr) == 0.0;
    if (zero_means.empty() || !literal_zero) {
      throw UsageError("--" + name + "='" + text + "' " + (literal_zero ? "is 0" : "rounds to 0 ms") + ": " + expected);
    }
  }
  return value;
}

std::string string_option(const cxxopts::ParseResult& parsed, const std::string& name, const std::string& fallback) {
  if (!parsed.count(name)) return fallback;
  std::string value = parsed[name].as<std::string>();
  if (value.empty()) throw UsageError("--" + name + " must not be empty");
  return value;
}

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Throws UsageError, naming `what`, what is wrong with `name` and the fix, unless find_executable finds it.
void require_executable(const std::string& what, const std::string& name, const std::string& fix) {
  if (!find_executable(name).empty()) return;
  std::string problem = "was not found or is not executable: " + fix;
  struct stat info {};
  if (name.find('/') != std::string::npos && stat(name.c_str(), &info) == 0) {
    // execve refuses a directory too, but in every rank of every attempt: say it here, once.
    if (S_ISDIR(info.st_mode)) {
      problem = "is a directory, not a program: " + fix;
    } else if (!S_ISREG(info.st_mode)) {
      problem = "is not a regular file: " + fix;
    } else {
      problem = "is not executable: make it so (chmod +x) or " + fix;
    }
  }
  throw UsageError(what + " '" + name + "' " + problem);
}

void check_consistency(const Options& o) {
  if (o.program.empty()) {
    throw UsageError(std::string("no program to launch: usage: ") + kUsageLine);
  }
  require_executable("PROGRAM", o.program.front(), "give the path of the program's executable or put it on PATH");
  if (o.mode == Mode::Local && o.ranks == 0) throw UsageError("--ranks (-n) is required in local mode");
  if (o.mode == Mode::Local && !may_span_hosts(o.extra_launcher_args)) {
    // Every rank is a process on this machine: far more than its CPUs is a typo (mpirun would fork until memory runs
    // out) rather than a job. Oversubscribing a few times, as tests and small runs do, stays possible; ranks that
    // mpirun may spread over hosts are not counted against this one.
    const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    const long most = std::max(64L, 16 * cpus);
    if (o.ranks > most)
      throw UsageError("--ranks " + std::to_string(o.ranks) + " in local mode starts every rank on this machine, " +
                       "which has " + std::to_string(cpus) + " CPUs: at most " + std::to_string(most) +
                       " (16 per CPU, or 64); run more ranks under Slurm (--mode slurm, inside an allocation)");
  }
  if (o.mode == Mode::Local && (o.nodes || o.tasks_per_node || o.spare_nodes || o.elastic)) {
    throw UsageError(
        "--nodes, --tasks-per-node, --spare-nodes and --elastic need Slurm mode (inside an allocation "
        "or --mode slurm)");
  }
  if (o.backoff_max < o.backoff) throw UsageError("--backoff-max must not be shorter than --backoff");
  if (o.hang_timeout.count() > 0 && o.hang_timeout < 2 * o.heartbeat_interval) {
    throw UsageError("--hang-timeout must be at least twice --heartbeat-interval, else healthy ranks look silent");
  }
  if (o.hang_timeout_min < 2 * o.heartbeat_interval) {
    throw UsageError("--hang-timeout-min must be at least twice --heartbeat-interval");
  }
  if (o.elastic && o.nodes && o.min_nodes > o.nodes) throw UsageError("--min-nodes must not exceed --nodes");
  if (o.ranks && o.ranks % o.model_parallel != 0) {
    throw UsageError("--ranks (" + std::to_string(o.ranks) + ") must be a multiple of --model-parallel (" +
                     std::to_string(o.model_parallel) + ")");
  }
}

}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;  // a directory of that name is passed over, as by execvp
  }
  return "";
}

ParseResult parse_options(int argc, const char* const* argv) {
  // Everything after "--" is the program and its arguments, untouched by option parsing.
  std::vector<const char*> own = {argc > 0 ? argv[0] : "tenax-launch"};
  Options options;
  bool program_part = false;
  for (int i = 1; i < argc; ++i) {
    if (program_part) {
      options.program.emplace_back(argv[i]);
    } else if (std::string_view(argv[i]) == "--") {
      program_part = true;
    } else {
      own.push_back(argv[i]);
    }
  }

  auto parser = make_parser();
  cxxopts::ParseResult parsed;
  try {
    int own_argc = static_cast<int>(own.size());
    parsed = parser.parse(own_argc, own.data());
  } catch (const cxxopts::exceptions::exception& error) {
    throw UsageError(std::string(error.what()) + " (see tenax-launch --help)");
  }
  if (!parsed.unmatched().empty()) {
    throw UsageError("unexpected argument '" + parsed.unmatched().front() + "': put the program after '--' (" +
                     kUsageLine + ")");
  }
  if (parsed.count("help")) {
    return {std::nullopt,
            parser.help({"Ranks and placement", "Restarts", "Failure detection", "Files and programs", "Help"})};
  }
  if (parsed.count("help-env")) return {std::nullopt, env::describe()};
  // The ranks inherit this environment: a bad TENAX_* variable must stop the launch here, not in every attempt.
  env::validate();

  if (parsed.count("mode")) {
    auto mode = parsed["mode"].as<std::string>();
    if (mode == "auto") {
      options.mode = Mode::Auto;
    } else if (mode == "local") {
      options.mode = Mode::Local;
    } else if (mode == "slurm") {
      options.mode = Mode::Slurm;
    } else {
      throw UsageError("--mode must be local, slurm or auto, not '" + mode + "'");
    }
  }
  if (options.mode == Mode::Auto) {
    const char* job = std::getenv("SLURM_JOB_ID");
    options.mode = (job != nullptr && *job != '\0') ? Mode::Slurm : Mode::Local;
  }

  // Precedence: command line > environment (the SPANK plugin exports its --tenax-* job options) > built-in default.
  if (env::is_set("TENAX_MAX_RESTARTS")) options.max_restarts = static_cast<int>(env::get_int("TENAX_MAX_RESTARTS"));
  if (options.mode == Mode::Slurm && env::is_set("TENAX_SPARES")) {
    options.spare_nodes = static_cast<int>(env::get_int("TENAX_SPARES"));
  }
  options.ranks = int_option(parsed, "ranks", 0, 1, 1000000);
  options.nodes = int_option(parsed, "nodes", 0, 1, 100000);
  options.tasks_per_node = int_option(parsed, "tasks-per-node", 0, 1, 4096);
  options.spare_nodes = int_option(parsed, "spare-nodes", options.spare_nodes, 0, 100000);
  options.max_restarts = int_option(parsed, "max-restarts", options.max_restarts, 0, 1000000);
  // The site's limits, which the SPANK plugin exports: the plugin refuses --tenax-* options above them, and the
  // launcher's own options (or TENAX_* variables set by hand) must not be the way around them (a policy, like the
  // plugin's: not a security boundary).
  const auto hold_to_site = [](const char* option, int value, const char* variable, const char* key) {
    if (!env::is_set(variable)) return;
    const long long site = env::get_int(variable);
    if (value > site)
      throw UsageError(std::string(option) + " " + std::to_string(value) + " exceeds this cluster's limit of " +
                       std::to_string(site) + " (" + key + " of the tenax SPANK plugin, " + variable +
                       "): ask for at most " + std::to_string(site));
  };
  hold_to_site("--max-restarts", options.max_restarts, "TENAX_SITE_MAX_RESTARTS", "max_restarts");
  hold_to_site("--spare-nodes", options.spare_nodes, "TENAX_SITE_MAX_SPARES", "max_spares");
  options.no_progress_limit = int_option(parsed, "no-progress-limit", options.no_progress_limit, 1, 1000000);
  options.bad_node_strikes = int_option(parsed, "bad-node-strikes", options.bad_node_strikes, 1, 1000);
  options.min_nodes = int_option(parsed, "min-nodes", options.min_nodes, 1, 100000);
  options.model_parallel = int_option(parsed, "model-parallel", options.model_parallel, 1, 1000000);
  options.elastic = parsed.count("elastic") > 0;
  options.requeue = parsed.count("no-requeue") == 0;

  options.backoff = duration_option(parsed, "backoff", options.backoff, "relaunches at once");
  options.backoff_max = duration_option(parsed, "backoff-max", options.backoff_max, "relaunches at once");
  options.hang_timeout = duration_option(parsed, "hang-timeout", options.hang_timeout, "disables hang detection");
  options.detect_hangs = !(parsed.count("hang-timeout") && options.hang_timeout.count() == 0);
  options.hang_timeout_min = duration_option(parsed, "hang-timeout-min", options.hang_timeout_min, "");
  options.startup_timeout = duration_option(parsed, "startup-timeout", options.startup_timeout, "");
  options.heartbeat_interval = duration_option(parsed, "heartbeat-interval", options.heartbeat_interval, "");
  options.kill_grace = duration_option(parsed, "kill-grace", options.kill_grace, "kills at once");
  options.preempt_grace = duration_option(parsed, "preempt-grace", options.preempt_grace, "");
  if (parsed.count("hang-factor")) {
    const std::string text = parsed["hang-factor"].as<std::string>();
    char* end = nullptr;
    options.hang_factor = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(options.hang_factor >= 1.0) || options.hang_factor > 1000) {
      throw UsageError("--hang-factor must be a number from 1 to 1000, not '" + text + "'");
    }
  }

  options.run_dir = string_option(parsed, "run-dir", options.run_dir);
  options.checkpoint_dir = string_option(parsed, "checkpoint-dir", options.checkpoint_dir);
  // "none" means what it means to the program (TENAX_CHECKPOINT_DIR=none): no checkpoints, so no directory to create
  // and restart progress judged by heartbeats. A directory really named "none" is "./none".
  if (options.checkpoint_dir == "none") options.checkpoint_dir.clear();
  options.mpirun = string_option(parsed, "mpirun", options.mpirun);
  options.srun = string_option(parsed, "srun", options.srun);
  options.scontrol = string_option(parsed, "scontrol", options.scontrol);
  options.srun_mpi = string_option(parsed, "srun-mpi", options.srun_mpi);
  if (parsed.count("launcher-arg")) options.extra_launcher_args = parsed["launcher-arg"].as<std::vector<std::string>>();

  check_consistency(options);
  const std::string& starter = options.mode == Mode::Local ? options.mpirun : options.srun;
  require_executable(options.mode == Mode::Local ? "--mpirun" : "--srun", starter, "give its path, or put it on PATH");
  return {std::move(options), ""};
}

}  // namespace tenax::launch
