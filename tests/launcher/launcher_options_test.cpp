#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "attempt_runner.hpp"
#include "options.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

ParseResult parse(std::vector<const char*> args) {
  args.insert(args.begin(), "tenax-launch");
  return parse_options(static_cast<int>(args.size()), args.data());
}

std::string usage_message(std::vector<const char*> args) {
  try {
    parse(std::move(args));
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(LauncherOptions, ParsesALocalLaunch) {
  auto result = parse({"--mode", "local", "-n", "4", "--max-restarts", "5", "--hang-timeout", "90s", "--backoff",
                       "250ms", "--run-dir", "/tmp/r", "--checkpoint-dir", "/tmp/c", "--", "/bin/true", "--lr", "1"});
  ASSERT_TRUE(result.options.has_value());
  const Options& o = *result.options;
  EXPECT_EQ(o.mode, Mode::Local);
  EXPECT_EQ(o.ranks, 4);
  EXPECT_EQ(o.max_restarts, 5);
  EXPECT_EQ(o.hang_timeout.count(), 90000);
  EXPECT_EQ(o.backoff.count(), 250);
  EXPECT_EQ(o.run_dir, "/tmp/r");
  EXPECT_EQ(o.checkpoint_dir, "/tmp/c");
  EXPECT_EQ(o.program, (std::vector<std::string>{"/bin/true", "--lr", "1"}));
}

TEST(LauncherOptions, BadValuesNameTheirOption) {
  EXPECT_NE(
      usage_message({"--mode", "local", "-n", "2", "--max-restarts", "lots", "--", "/bin/true"}).find("--max-restarts"),
      std::string::npos);
  EXPECT_NE(
      usage_message({"--mode", "local", "-n", "2", "--hang-timeout", "soon", "--", "/bin/true"}).find("--hang-timeout"),
      std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "0", "--", "/bin/true"}).find("--ranks"), std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "1000000", "--", "/bin/true"})
                .find("--ranks 1000000 in local mode starts every rank on this machine"),
            std::string::npos);
  EXPECT_NE(usage_message({"--mode", "cloud", "-n", "2", "--", "/bin/true"}).find("--mode"), std::string::npos);
  EXPECT_NE(
      usage_message({"--mode", "local", "-n", "2", "--hang-factor", "0.5", "--", "/bin/true"}).find("--hang-factor"),
      std::string::npos);
  EXPECT_NE(usage_message({"--no-such-option", "--", "/bin/true"}).find("no-such-option"), std::string::npos);
  // A duration past the parser's limit says so, and names the limit.
  const std::string too_long =
      usage_message({"--mode", "local", "-n", "2", "--startup-timeout", "1000001h", "--", "/bin/true"});
  EXPECT_NE(too_long.find("--startup-timeout='1000001h' is too long"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("at most 1000000h"), std::string::npos) << too_long;
}

TEST(LauncherOptions, TheProgramMustExistAndComeAfterTheSeparator) {
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2"}).find("no program"), std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2", "--", "/nonexistent/trainer"}).find("/nonexistent/trainer"),
            std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2", "/bin/true"}).find("after '--'"), std::string::npos);
}

// A directory passes access(X_OK); it once got through to every attempt, failed to start each time and ended as a
// restart loop (exit 71) instead of a usage error.
TEST(LauncherOptions, ADirectoryIsNoProgram) {
  const std::string by_path = usage_message({"--mode", "local", "-n", "2", "--", "/tmp"});
  EXPECT_NE(by_path.find("PROGRAM '/tmp' is a directory"), std::string::npos) << by_path;
  // On PATH, a directory of the program's name is passed over, as execvp does; none else: not found.
  const char* saved = std::getenv("PATH");
  const std::string saved_path = saved != nullptr ? saved : "";
  setenv("PATH", "/", 1);
  const std::string on_path = usage_message({"--mode", "local", "-n", "2", "--", "tmp"});
  setenv("PATH", saved_path.c_str(), 1);
  EXPECT_NE(on_path.find("PROGRAM 'tmp' was not found"), std::string::npos) << on_path;
  EXPECT_EQ(find_executable("/tmp"), "");
  EXPECT_EQ(find_executable("/bin/sh"), "/bin/sh");
  // The same for the process manager.
  const std::string mpirun = usage_message({"--mode", "local", "-n", "2", "--mpirun", "/tmp", "--", "/bin/true"});
  EXPECT_NE(mpirun.find("--mpirun '/tmp' is a directory"), std::string::npos) << mpirun;
}

TEST(LauncherOptions, InconsistentCombinationsAreRejected) {
  EXPECT_NE(usage_message({"--mode", "local", "--", "/bin/true"}).find("--ranks (-n) is required"), std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2", "--spare-nodes", "1", "--", "/bin/true"}).find("Slurm mode"),
            std::string::npos);
  EXPECT_NE(usage_message(
                {"--mode", "local", "-n", "2", "--hang-timeout", "1s", "--heartbeat-interval", "1s", "--", "/bin/true"})
                .find("twice --heartbeat-interval"),
            std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2", "--backoff", "10s", "--backoff-max", "1s", "--", "/bin/true"})
                .find("--backoff-max"),
            std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "3", "--model-parallel", "2", "--", "/bin/true"})
                .find("multiple of --model-parallel"),
            std::string::npos);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2", "--mpirun", "/nonexistent/mpirun", "--", "/bin/true"})
                .find("--mpirun"),
            std::string::npos);
}

// "--hang-timeout 0" disables hang detection, as the usual convention (and the duration parser's own hint) says; it
// was once refused with "must be longer than 0".
// The SPANK plugin exports the site's limits; tenax-launch's own options (or TENAX_* set by hand) must not exceed them.
TEST(LauncherOptions, TheSitesLimitsHoldForTheLaunchersOwnOptions) {
  ::setenv("TENAX_SITE_MAX_RESTARTS", "5", 1);
  ::setenv("TENAX_SITE_MAX_SPARES", "1", 1);
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2", "--max-restarts", "6", "--", "/bin/true"})
                .find("--max-restarts 6 exceeds this cluster's limit of 5 (max_restarts of the tenax SPANK plugin"),
            std::string::npos);
  ::setenv("TENAX_MAX_RESTARTS", "50", 1);  // set by hand in the batch script, no option
  EXPECT_NE(usage_message({"--mode", "local", "-n", "2", "--", "/bin/true"}).find("--max-restarts 50 exceeds"),
            std::string::npos);
  ::unsetenv("TENAX_MAX_RESTARTS");
  EXPECT_NE(usage_message({"--mode", "slurm", "--spare-nodes", "2", "--", "/bin/true"})
                .find("--spare-nodes 2 exceeds this cluster's limit of 1"),
            std::string::npos);
  auto within = parse({"--mode", "slurm", "--max-restarts", "5", "--spare-nodes", "1", "--", "/bin/true"});
  ASSERT_TRUE(within.options.has_value());
  EXPECT_EQ(within.options->max_restarts, 5);
  ::unsetenv("TENAX_SITE_MAX_RESTARTS");
  ::unsetenv("TENAX_SITE_MAX_SPARES");
  auto anywhere = parse({"--mode", "local", "-n", "2", "--max-restarts", "50", "--", "/bin/true"});
  ASSERT_TRUE(anywhere.options.has_value()) << "no plugin, no site limit";
}

TEST(LauncherOptions, CheckpointDirNoneMeansNoCheckpointsNotADirectoryNamedNone) {
  auto none = parse({"--mode", "local", "-n", "2", "--checkpoint-dir", "none", "--", "/bin/true"});
  ASSERT_TRUE(none.options.has_value());
  EXPECT_EQ(none.options->checkpoint_dir, "");
  auto named = parse({"--mode", "local", "-n", "2", "--checkpoint-dir", "./none", "--", "/bin/true"});
  ASSERT_TRUE(named.options.has_value());
  EXPECT_EQ(named.options->checkpoint_dir, "./none");
}

TEST(LauncherOptions, HangTimeoutZeroDisablesHangDetection) {
  auto disabled = parse({"--mode", "local", "-n", "2", "--hang-timeout", "0", "--", "/bin/true"});
  ASSERT_TRUE(disabled.options.has_value());
  EXPECT_FALSE(disabled.options->detect_hangs);
  EXPECT_FALSE(hang_settings(*disabled.options).enabled);
  auto derived = parse({"--mode", "local", "-n", "2", "--", "/bin/true"});
  ASSERT_TRUE(derived.options.has_value());
  EXPECT_TRUE(derived.options->detect_hangs);
  EXPECT_TRUE(hang_settings(*derived.options).enabled);
  EXPECT_EQ(hang_settings(*derived.options).fixed_timeout_s, 0.0) << "no --hang-timeout: derived";
  for (const char* zero : {"0s", "0ms", "0.0"}) {
    auto parsed = parse({"--mode", "local", "-n", "2", "--hang-timeout", zero, "--", "/bin/true"});
    ASSERT_TRUE(parsed.options.has_value()) << zero;
    EXPECT_FALSE(parsed.options->detect_hangs) << zero;
  }
  // A value that only rounds to 0 ms is a mistake, not a request to disable.
  const std::string tiny =
      usage_message({"--mode", "local", "-n", "2", "--hang-timeout", "0.0001s", "--", "/bin/true"});
  EXPECT_NE(tiny.find("--hang-timeout"), std::string::npos) << tiny;
  EXPECT_NE(tiny.find("rounds to 0"), std::string::npos) << tiny;
  // The help says so; options that refuse 0 do not claim that it disables them.
  std::string help;  // the help wraps its lines: compare with single spaces
  for (char c : parse({"--help"}).text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      help += c;
    } else if (!help.empty() && help.back() != ' ') {
      help += ' ';
    }
  }
  EXPECT_NE(help.find("0 disables hang detection"), std::string::npos) << help;
  const std::string startup =
      usage_message({"--mode", "local", "-n", "2", "--startup-timeout", "soon", "--", "/bin/true"});
  EXPECT_NE(startup.find("--startup-timeout"), std::string::npos) << startup;
  EXPECT_EQ(startup.find("0 disables"), std::string::npos) << startup;
  const std::string hang = usage_message({"--mode", "local", "-n", "2", "--hang-timeout", "soon", "--", "/bin/true"});
  EXPECT_NE(hang.find("0 disables"), std::string::npos) << hang;
}

TEST(LauncherOptions, HelpDocumentsEveryOptionAndHelpEnvListsTheRegistry) {
  auto help = parse({"--help"});
  EXPECT_FALSE(help.options.has_value());
  for (const char* option : {"--ranks", "--nodes", "--max-restarts", "--backoff", "--hang-timeout", "--spare-nodes",
                             "--checkpoint-dir", "--run-dir", "--elastic", "--no-progress-limit", "--help-env"}) {
    EXPECT_NE(help.text.find(option), std::string::npos) << option;
  }
  auto env = parse({"--help-env"});
  EXPECT_FALSE(env.options.has_value());
  for (const char* name : {"TENAX_RUN_DIR", "TENAX_HEARTBEAT_INTERVAL", "TENAX_ATTEMPT", "TENAX_LOG_LEVEL"}) {
    EXPECT_NE(env.text.find(name), std::string::npos) << name;
  }
}

TEST(LauncherOptions, TheEnvironmentSetsDefaultsAndTheCommandLineWins) {
  setenv("TENAX_MAX_RESTARTS", "7", 1);
  setenv("TENAX_SPARES", "2", 1);
  auto from_env = parse({"--mode", "slurm", "--srun", "/bin/true", "--", "/bin/true"});
  auto from_line =
      parse({"--mode", "slurm", "--srun", "/bin/true", "--max-restarts", "1", "--spare-nodes", "0", "--", "/bin/true"});
  setenv("TENAX_MAX_RESTARTS", "many", 1);
  std::string bad = usage_message({"--mode", "local", "-n", "1", "--", "/bin/true"});
  unsetenv("TENAX_MAX_RESTARTS");
  unsetenv("TENAX_SPARES");
  ASSERT_TRUE(from_env.options && from_line.options);
  EXPECT_EQ(from_env.options->max_restarts, 7);
  EXPECT_EQ(from_env.options->spare_nodes, 2);
  EXPECT_EQ(from_line.options->max_restarts, 1);
  EXPECT_EQ(from_line.options->spare_nodes, 0);
  EXPECT_NE(bad.find("TENAX_MAX_RESTARTS"), std::string::npos) << bad;
}

TEST(LauncherOptions, SlurmModeIsChosenInsideAnAllocation) {
  setenv("SLURM_JOB_ID", "4242", 1);
  auto result = parse({"--nodes", "2", "--srun", "/bin/true", "--", "/bin/true"});
  unsetenv("SLURM_JOB_ID");
  ASSERT_TRUE(result.options.has_value());
  EXPECT_EQ(result.options->mode, Mode::Slurm);
  EXPECT_EQ(result.options->nodes, 2);
}

}  // namespace
}  // namespace tenax::launch
