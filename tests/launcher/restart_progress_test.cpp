// Restart-loop protection: what counts as progress, the newest committed checkpoint on disk, and the replay of both
// from the ledger after a requeue.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint_scan.hpp"
#include "classify.hpp"
#include "ledger.hpp"
#include "restart_progress.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

TEST(RestartProgress, OnlyANewerCommittedCheckpointIsProgressWhenJudgedByCheckpoints) {
  ProgressTracker t;
  EXPECT_TRUE(t.record(ProgressBasis::Checkpoint, {.max_step = 7, .committed_step = 5}, true));
  EXPECT_EQ(t.streak(), 0);
  // Further by heartbeats (9 > 7), but the restart goes back to checkpoint 5 again.
  EXPECT_FALSE(t.record(ProgressBasis::Checkpoint, {.max_step = 9, .committed_step = 5}, true));
  EXPECT_FALSE(t.record(ProgressBasis::Checkpoint, {.max_step = 12, .committed_step = 5}, true));
  EXPECT_EQ(t.streak(), 2);
  EXPECT_EQ(t.state(ProgressBasis::Checkpoint).best, 5);
  EXPECT_EQ(t.best_max_step(), 12);
  EXPECT_TRUE(t.record(ProgressBasis::Checkpoint, {.max_step = 12, .committed_step = 10}, true));
  EXPECT_EQ(t.streak(), 0);
}

// A run whose checkpoints are all damaged resumes from none of them and fails before it commits: the checkpoints
// already in the directory are no progress of its attempts.
TEST(RestartProgress, CheckpointsThatWereThereBeforeTheFirstAttemptAreNoProgress) {
  ProgressTracker t;
  t.start_from(6);
  EXPECT_FALSE(t.record(ProgressBasis::Checkpoint, {.max_step = -1, .committed_step = 6}, true));
  EXPECT_EQ(t.streak(), 1);
  EXPECT_TRUE(t.record(ProgressBasis::Checkpoint, {.max_step = 9, .committed_step = 8}, true));
  t.start_from(2);  // never lowers what is known
  EXPECT_EQ(t.best_committed_step(), 8);
}

TEST(RestartProgress, WithoutACheckpointDirectoryTheHighestHeartbeatStepCounts) {
  ProgressTracker t;
  EXPECT_TRUE(t.record(ProgressBasis::Heartbeat, {.max_step = 7, .committed_step = 0}, true));
  EXPECT_TRUE(t.record(ProgressBasis::Heartbeat, {.max_step = 9, .committed_step = 0}, true));
  EXPECT_FALSE(t.record(ProgressBasis::Heartbeat, {.max_step = 9, .committed_step = 0}, true));
  EXPECT_EQ(t.streak(), 1);
  EXPECT_EQ(t.state(ProgressBasis::Heartbeat).best, 9);
}

TEST(RestartProgress, SuccessesAndPreemptionsEndTheStreakOnlyWithProgress) {
  ProgressTracker t;
  t.record(ProgressBasis::Checkpoint, {3, 0}, true);
  t.record(ProgressBasis::Checkpoint, {3, 0}, true);
  ASSERT_EQ(t.streak(), 1);
  EXPECT_FALSE(t.record(ProgressBasis::Checkpoint, {4, 0}, /*failed=*/false));  // preempted before a new checkpoint
  EXPECT_EQ(t.streak(), 1);
  EXPECT_TRUE(t.record(ProgressBasis::Checkpoint, {4, 4}, /*failed=*/false));  // its emergency checkpoint
  EXPECT_EQ(t.streak(), 0);
  t.record(ProgressBasis::Checkpoint, {5, 4}, true);
  t.reset_streak();
  EXPECT_EQ(t.streak(), 0);
}

TEST(RestartProgress, BasisNamesRoundTrip) {
  for (auto basis : {ProgressBasis::Checkpoint, ProgressBasis::Heartbeat})
    EXPECT_EQ(parse_progress_basis(progress_basis_name(basis)), basis);
  EXPECT_FALSE(parse_progress_basis("steps"));
}

TEST(RestartProgress, TheDecisionNamesTheBasisAndTheNewestCommittedStep) {
  Options options;
  options.no_progress_limit = 2;
  Classification crash;
  crash.outcome = Outcome::Crash;
  Decision d = decide(options, crash, 0, {ProgressBasis::Checkpoint, 2, 15});
  EXPECT_EQ(d.exit_code, kExitNoProgress);
  EXPECT_NE(
      d.reason.find("restart loop: 2 consecutive attempts committed no new checkpoint (newest committed step 15)"),
      std::string::npos)
      << d.reason;
  d = decide(options, crash, 0, {ProgressBasis::Heartbeat, 2, 9});
  EXPECT_NE(d.reason.find("reached no new highest step (highest step 9; without --checkpoint-dir"), std::string::npos)
      << d.reason;
  EXPECT_EQ(decide(options, crash, 0, {ProgressBasis::Checkpoint, 1, 15}).action, Decision::Action::Retry);
}

class CheckpointScan : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TENAX_LAUNCH_TEST_TMP) + "/ckpt-scan-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void step_dir(const std::string& name, bool manifest) {
    std::filesystem::create_directories(dir_ + "/" + name);
    if (manifest) std::ofstream(dir_ + "/" + name + "/manifest.json") << "{}\n";
  }
  std::string dir_;
};

TEST_F(CheckpointScan, NoDirectoryOrNoCheckpointIsMinusOne) {
  EXPECT_EQ(newest_committed_checkpoint(dir_ + "/absent"), -1);
  EXPECT_EQ(newest_committed_checkpoint(dir_), -1);
}

TEST_F(CheckpointScan, OnlyStepDirectoriesHoldingAManifestAreCommitted) {
  step_dir("step_5", true);
  step_dir("step_10", true);
  step_dir("step_9", true);
  step_dir("step_40", false);          // being written by an older layout, or its manifest never landed
  step_dir("step_50.tmp", true);       // being written (the manifest is written before the rename)
  step_dir("step_60.deleting", true);  // being removed by retention
  step_dir("step_70.superseded", true);
  step_dir("step_80x", true);
  step_dir("step_", true);
  step_dir("step_99999999999999999999999", true);  // not a 64-bit step
  std::ofstream(dir_ + "/step_90") << "a file, not a checkpoint\n";
  std::ofstream(dir_ + "/latest") << "step_5\n";  // one behind: the scan does not trust it
  EXPECT_EQ(newest_committed_checkpoint(dir_), 10);
  std::filesystem::rename(dir_ + "/step_50.tmp", dir_ + "/step_50");
  EXPECT_EQ(newest_committed_checkpoint(dir_), 50);
  // A copy under another step's name (its manifest says step 50), or a name never written (leading zeros), is no
  // checkpoint of that step, as the runtime decides too.
  step_dir("step_0070", true);
  std::filesystem::create_directories(dir_ + "/step_1000");
  std::ofstream(dir_ + "/step_1000/manifest.json") << "{\"version\": 3, \"step\": 50}\n";
  EXPECT_EQ(newest_committed_checkpoint(dir_), 50);
  std::ofstream(dir_ + "/step_1000/manifest.json") << "{\"version\": 3, \"step\": 1000}\n";
  EXPECT_EQ(newest_committed_checkpoint(dir_), 1000);
}

TEST_F(CheckpointScan, AnUnreadableDirectoryIsAnIoErrorNamingIt) {
  if (geteuid() == 0) {
    // root reads any directory: use a path that is not a directory instead.
    std::ofstream(dir_ + "/plain") << "x";
    try {
      newest_committed_checkpoint(dir_ + "/plain");
      FAIL() << "expected IoError";
    } catch (const IoError& error) {
      EXPECT_NE(std::string(error.what()).find(dir_ + "/plain"), std::string::npos) << error.what();
    }
    return;
  }
  std::filesystem::permissions(dir_, std::filesystem::perms::none);
  EXPECT_THROW(newest_committed_checkpoint(dir_), IoError);
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
}

}  // namespace
}  // namespace tenax::launch
