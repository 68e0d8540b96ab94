// The training example as a fault-tolerant program, end to end: tenax-launch over real mpirun ranks of
// tenax-example-lm, real HDF5 checkpoints, real signals. A run that is killed, preempted or resumed must end where an
// uninterrupted run ends: bitwise in the same layout (fp32 on the CPU is deterministic), within a stated tolerance of
// the loss when the layout changes (the reduction order changes with it).
#include <gtest/gtest.h>
#include <signal.h>
#include <algorithm>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>

#include "launch_harness.hpp"

namespace tenax::test {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// A small model: a step takes a few milliseconds on 4 ranks.
const std::vector<std::string> kModel = {"--vocab",   "64", "--hidden", "32", "--layers",      "2",
                                         "--seq-len", "8",  "--batch",  "8",  "--micro-batch", "2"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

std::vector<std::string> example_args(const std::vector<std::string>& more) {
  return with(kModel, more);
}

// "step N loss X" lines of rank 0.
std::map<long, double> losses(const std::string& output) {
  static const std::regex pattern(R"(step (\d+) loss ([0-9.]+))");
  std::map<long, double> out;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), pattern); it != std::sregex_iterator(); ++it)
    out[std::stol((*it)[1].str())] = std::stod((*it)[2].str());
  return out;
}

std::vector<std::string> checkpoint_steps(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step_", 0) == 0 && name.find(".tmp") == std::string::npos)
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ExampleFaultTolerance, KillNineOfARandomRankAtARandomStepRestartsToTheSameResult) {
  const int ranks = 4;
  // The default model (about 60 ms a step here): slow enough for the kill to land at a step chosen in advance.
  const std::vector<std::string> args = {"--tp", "2", "--steps", "100", "--checkpoint-every", "10"};
  const std::string expected = reference_checksum(ranks, args);
  std::random_device seed_source;
  const unsigned seed = seed_source();
  std::mt19937 rng(seed);
  const int victim = static_cast<int>(rng() % ranks);
  const long long at_step = 3 + static_cast<long long>(rng() % 70);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": kill -9 of rank " + std::to_string(victim) + " at step " +
               std::to_string(at_step));

  ScratchDir dir("kill9");
  Launch launch(quick_restart_launcher_args(dir, ranks), args, dir / "out.txt");
  auto beat = wait_for_step(dir / "run", victim, 1, at_step, seconds(50));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);

  ASSERT_EQ(launch.wait(seconds(90)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  EXPECT_NE(output.find("attempt 1 crash: rank " + std::to_string(victim) + " on "), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 2u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "crash");
  EXPECT_EQ(json_string(attempts[1], "outcome"), "success");
  // Resumed from a periodic checkpoint at or before the kill. Saves are asynchronous: the checkpoint of the last
  // multiple of 10 before the kill may still have been in flight (then it was rightly discarded), but the one before
  // it had committed, since at most one checkpoint is in flight and the next save waits for it.
  const double resumed = json_number(attempts[1], "resumed_step");
  EXPECT_EQ(std::fmod(resumed, 10.0), 0.0);
  EXPECT_GE(resumed, static_cast<double>(std::max(0LL, (beat->step / 10) * 10 - 10)));
  EXPECT_LE(resumed, json_number(attempts[0], "max_step"));
  if (resumed > 0) {
    EXPECT_NE(output.find("resumed from " + (dir / "ckpt") + "/step_" + std::to_string(static_cast<long>(resumed))),
              std::string::npos)
        << output;
  }
}

// Outside Slurm a run that stops unfinished keeps its node-local copies: the same command, run again, resumes from
// them (tenax-launch removed them whatever the exit, and the next run started over from the shared directory, or from
// step 0 when the node-local tier had saved more often). A finished run removes them.
TEST(ExampleFaultTolerance, ARunThatGivesUpKeepsItsNodeLocalCopiesForTheNextInvocation) {
  const int ranks = 2;
  const std::vector<std::string> args = {"--steps", "60", "--checkpoint-every", "10"};
  const std::string expected = reference_checksum(ranks, args);
  ScratchDir dir("give-up-local"), local("give-up-local-tier");
  struct LocalTier {  // set for both invocations, unset however the test ends
    explicit LocalTier(const std::string& path) { ::setenv("TENAX_CKPT_LOCAL_DIR", path.c_str(), 1); }
    ~LocalTier() { ::unsetenv("TENAX_CKPT_LOCAL_DIR"); }
  } tier(local.path());
  std::vector<std::string> launcher = with(quick_restart_launcher_args(dir, ranks), {"--max-restarts", "0"});
  int first_exit = 0;
  std::string first_output;
  {
    Launch launch(launcher, args, dir / "out1.txt");
    auto beat = wait_for_step(dir / "run", 1, 1, 25, seconds(60));
    ASSERT_TRUE(beat.has_value()) << launch.output();
    ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);
    first_exit = launch.wait(seconds(60));
    first_output = launch.output();
  }
  EXPECT_EQ(first_exit, 70) << first_output;  // gave up: no relaunch allowed
  EXPECT_NE(first_output.find("kept this run's node-local checkpoint copies (" + local.path() + "/tenax-"),
            std::string::npos)
      << first_output;
  EXPECT_EQ(first_output.find("removed this run's node-local checkpoint copies"), std::string::npos) << first_output;
  // The newest step every rank kept a copy of, and the shared directory's newest: the restart reads the copies when
  // they are at least as new (the kill may land between a shared commit and the last rank's copy of that step).
  long kept = -1;
  for (const auto& folder : fs::directory_iterator(local.path()))
    for (int rank = 0; rank < ranks; ++rank) {
      long newest = -1;
      for (const std::string& name : checkpoint_steps((folder.path() / ("rank_" + std::to_string(rank))).string()))
        newest = std::max(newest, std::stol(name.substr(5)));
      kept = rank == 0 ? newest : std::min(kept, newest);
    }
  ASSERT_GE(kept, 10) << "the copies were not kept\n" << first_output;
  long shared = 0;
  for (const std::string& name : checkpoint_steps(dir / "ckpt"))
    shared = std::max(shared, std::stol(name.substr(5)));

  Launch again(launcher, args, dir / "out2.txt");
  const int second_exit = again.wait(seconds(90));
  const std::string output = again.output();
  ASSERT_EQ(second_exit, 0) << output;
  const std::string expected_source = kept >= shared ? local.path() + "/tenax-" : dir / "ckpt";
  EXPECT_NE(output.find("resumed from " + expected_source), std::string::npos)
      << "node-local copies up to step " << kept << ", shared up to " << shared << "\n"
      << output;
  EXPECT_EQ(final_checksum(output), expected) << output;
  EXPECT_NE(output.find("removed this run's node-local checkpoint copies from " + local.path()), std::string::npos)
      << output;
  EXPECT_TRUE(fs::is_empty(local.path())) << "a finished run removes its copies";
}

TEST(ExampleFaultTolerance, SigtermTakesAnEmergencyCheckpointAndASecondInvocationFinishesTheRun) {
  const int ranks = 4;
  const auto args = example_args({"--dp", "2", "--tp", "2", "--zero1", "--steps", "300", "--checkpoint-every", "25"});
  const std::string expected = reference_checksum(ranks, args);
  ScratchDir dir("sigterm");
  long long stop_step = 0;
  {
    Launch first(quick_restart_launcher_args(dir, ranks), args, dir / "out1.txt");
    auto beat = wait_for_step(dir / "run", 0, 1, 8, seconds(50));
    ASSERT_TRUE(beat.has_value()) << first.output();
    ASSERT_EQ(kill(first.pid(), SIGTERM), 0);
    ASSERT_EQ(first.wait(seconds(60)), 75) << first.output();
    const std::string output = first.output();
    EXPECT_EQ(final_checksum(output), "") << "the first run must stop early";
    static const std::regex committed(R"(preempted: emergency checkpoint of step (\d+) committed)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(output, m, committed)) << output;
    stop_step = std::stoll(m[1].str());
    EXPECT_GE(stop_step, 8);
    EXPECT_LT(stop_step, 300);
    EXPECT_EQ(losses(output).rbegin()->first, stop_step) << "every rank finishes the step it is in, then stops";
    auto attempts = ledger_lines(dir / "run", "attempt");
    ASSERT_EQ(attempts.size(), 1u) << output;
    EXPECT_EQ(json_string(attempts[0], "outcome"), "preempted");
    EXPECT_EQ(json_number(attempts[0], "checkpoint_step"), static_cast<double>(stop_step));
    // The emergency checkpoint's stall is shown apart from the periodic ones, and is one of them.
    EXPECT_GT(json_number(attempts[0], "final_checkpoint_s"), 0) << attempts[0];
    EXPECT_LE(json_number(attempts[0], "final_checkpoint_s"), json_number(attempts[0], "checkpoint_stall_s"));
    EXPECT_NE(output.find("final checkpoints"), std::string::npos) << output;
    const auto saved = checkpoint_steps(dir / "ckpt");
    ASSERT_FALSE(saved.empty());
    EXPECT_EQ(saved.back(), "step_" + std::to_string(stop_step));
  }
  Launch second(quick_restart_launcher_args(dir, ranks), args, dir / "out2.txt");
  ASSERT_EQ(second.wait(seconds(60)), 0) << second.output();
  const std::string output = second.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  EXPECT_NE(output.find("at step " + std::to_string(stop_step) + " (saved with layout"), std::string::npos) << output;
  EXPECT_EQ(losses(output).begin()->first, stop_step + 1) << "nothing is recomputed after an emergency checkpoint";
  const auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 2u) << output;
  EXPECT_GT(json_number(attempts[1], "final_checkpoint_s"), 0) << "the last checkpoint of training: " << attempts[1];
}

// Train 10 steps with tp=2 x dp=2 (with `first_options`), then resume the same checkpoint with other layouts. The sums
// of a matrix product and of the data-parallel reduction run in another order, so the values differ in the last bits:
// every resumed step's loss must be within 1e-4 (relative) of the uninterrupted tp=2 x dp=2 run's loss at the same
// step.
void expect_resume_continues(const std::vector<std::string>& first_options,
                             const std::vector<std::string>& resume_layout, int resume_ranks) {
  constexpr double kRelativeTolerance = 1e-4;
  const auto common = example_args({"--checkpoint-every", "5"});
  const auto first_layout = with({"--tp", "2", "--dp", "2"}, first_options);
  ScratchDir reference_dir("reshard-reference");
  Launch reference(quick_restart_launcher_args(reference_dir, 4), with(with(common, first_layout), {"--steps", "20"}),
                   reference_dir / "out.txt");
  ASSERT_EQ(reference.wait(seconds(60)), 0) << reference.output();
  const auto expected = losses(reference.output());
  ASSERT_EQ(expected.size(), 20u) << reference.output();

  ScratchDir dir("reshard");
  Launch first(quick_restart_launcher_args(dir, 4), with(with(common, first_layout), {"--steps", "10"}),
               dir / "out1.txt");
  ASSERT_EQ(first.wait(seconds(60)), 0) << first.output();
  const auto before = losses(first.output());
  for (long s = 1; s <= 10; ++s)
    EXPECT_EQ(before.at(s), expected.at(s)) << "step " << s << ": the same layout is bitwise reproducible";

  Launch second(quick_restart_launcher_args(dir, resume_ranks), with(with(common, resume_layout), {"--steps", "20"}),
                dir / "out2.txt");
  ASSERT_EQ(second.wait(seconds(60)), 0) << second.output();
  const std::string output = second.output();
  EXPECT_NE(output.find("resumed from " + (dir / "ckpt") + "/step_10 at step 10"), std::string::npos) << output;
  EXPECT_NE(final_checksum(output), "") << output;
  const auto after = losses(output);
  ASSERT_EQ(after.size(), 10u) << output;
  EXPECT_EQ(after.begin()->first, 11);
  for (const auto& [step, loss] : after)
    EXPECT_NEAR(loss, expected.at(step), kRelativeTolerance * expected.at(step)) << "step " << step;
  // Training went on: the loss kept falling from where the first run left it.
  EXPECT_LT(after.at(20), before.at(10));
}

// ZeRO-1 on both sides: the optimizer shards move from 2 to 4 data-parallel ranks and lose the tensor split.
TEST(ExampleFaultTolerance, ResumeWithFourDataParallelRanksInsteadOfTwoByTwo) {
  expect_resume_continues({"--zero1"}, {"--tp", "1", "--dp", "4", "--zero1"}, 4);
}

// A smaller world: 4 ranks -> 2, tp 2 -> 1.
TEST(ExampleFaultTolerance, ResumeOnTwoRanksWithoutTensorParallelism) {
  expect_resume_continues({}, {"--tp", "1", "--dp", "2"}, 2);
}

// Damages one shard of the newest of two checkpoints with `damage`; the next run must warn naming the file, resume from
// the previous checkpoint and still end bitwise where an uninterrupted run ends.
void expect_fallback_after(const std::function<void(const std::string&)>& damage) {
  const int ranks = 4;
  const auto common = example_args({"--tp", "2", "--checkpoint-every", "10"});
  const std::string expected = reference_checksum(ranks, with(common, {"--steps", "30"}));
  ScratchDir dir("corrupt");
  Launch first(quick_restart_launcher_args(dir, ranks), with(common, {"--steps", "20"}), dir / "out1.txt");
  ASSERT_EQ(first.wait(seconds(60)), 0) << first.output();
  ASSERT_EQ(checkpoint_steps(dir / "ckpt"), (std::vector<std::string>{"step_10", "step_20"}));
  const std::string shard = dir / "ckpt/step_20/rank_00001.h5";
  ASSERT_TRUE(fs::exists(shard));
  damage(shard);

  Launch second(quick_restart_launcher_args(dir, ranks), with(common, {"--steps", "30"}), dir / "out2.txt");
  ASSERT_EQ(second.wait(seconds(60)), 0) << second.output();
  const std::string output = second.output();
  EXPECT_NE(output.find("skipped a damaged checkpoint: " + (dir / "ckpt/step_20")), std::string::npos) << output;
  EXPECT_NE(output.find("rank_00001.h5"), std::string::npos) << "the warning names the damaged file\n" << output;
  EXPECT_NE(output.find("resumed from " + (dir / "ckpt") + "/step_10 at step 10"), std::string::npos) << output;
  EXPECT_EQ(losses(output).begin()->first, 11);
  EXPECT_EQ(final_checksum(output), expected) << output;
}

// A failing disk or an interrupted copy: the file is cut in half.
TEST(ExampleFaultTolerance, ATruncatedShardInTheNewestCheckpointFallsBackToThePreviousOne) {
  expect_fallback_after([](const std::string& shard) { fs::resize_file(shard, fs::file_size(shard) / 2); });
}

// Silent corruption: same size, 64 bytes in the second half of the file (the tensors' data) inverted.
TEST(ExampleFaultTolerance, ACorruptShardInTheNewestCheckpointFallsBackToThePreviousOne) {
  expect_fallback_after([](const std::string& shard) {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(fs::file_size(shard) * 3 / 4);
    std::vector<char> bytes(64);
    file.seekg(at);
    file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    for (char& b : bytes)
      b = static_cast<char>(~b);
    file.seekp(at);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(file.good());
  });
}

}  // namespace
}  // namespace tenax::test
