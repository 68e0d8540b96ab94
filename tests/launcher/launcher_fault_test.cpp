// tenax-launch against real failures: real mpirun, real ranks of the deterministic worker, real signals.
// Every test compares the final parameters with an uninterrupted run of the same program, bit for bit.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "launch_harness.hpp"

namespace tenax::test {
namespace {

using std::chrono::seconds;

const std::vector<std::string> kWorker = {"--steps", "30", "--checkpoint-every", "5", "--step-ms", "30"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<std::string> launcher_args(const ScratchDir& dir, int ranks, const std::vector<std::string>& more = {}) {
  return with({"-n", std::to_string(ranks), "--run-dir", dir / "run", "--checkpoint-dir", dir / "ckpt", "--backoff",
               "100ms", "--heartbeat-interval", "100ms", "--kill-grace", "500ms"},
              more);
}

TEST(LauncherFaults, KillNineOfARandomRankAtARandomStepRestartsToTheSameResult) {
  const int ranks = 3;
  const std::string expected = reference_checksum(ranks, kWorker);
  std::random_device seed_source;
  const unsigned seed = seed_source();
  std::mt19937 rng(seed);
  const int victim = static_cast<int>(rng() % ranks);
  const long long at_step = 2 + static_cast<long long>(rng() % 24);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": kill -9 of rank " + std::to_string(victim) + " at step " +
               std::to_string(at_step));

  ScratchDir dir("kill9");
  Launch launch(launcher_args(dir, ranks), kWorker, dir / "out.txt");
  auto beat = wait_for_step(dir / "run", victim, 1, at_step, seconds(40));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGKILL), 0);

  ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  EXPECT_NE(output.find("attempt 1 crash: rank " + std::to_string(victim) + " on "), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 2u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "crash");
  EXPECT_EQ(json_number(attempts[0], "rank"), victim);
  EXPECT_EQ(json_string(attempts[1], "outcome"), "success");
  // Resumed from the newest checkpoint at or before the kill (the heartbeat read may lag the kill by a step or two).
  const double resumed = json_number(attempts[1], "resumed_step");
  EXPECT_EQ(std::fmod(resumed, 5.0), 0.0);
  EXPECT_GE(resumed, static_cast<double>((beat->step / 5) * 5));
  EXPECT_LE(resumed, json_number(attempts[0], "max_step"));
}

TEST(LauncherFaults, SigstopOfOneRankIsAHangThatNamesTheRankAndRecovers) {
  const int ranks = 2;
  const std::string expected = reference_checksum(ranks, kWorker);
  ScratchDir dir("sigstop");
  const double hang_timeout = 1.5;
  Launch launch(launcher_args(dir, ranks, {"--hang-timeout", "1500ms"}), kWorker, dir / "out.txt");
  auto beat = wait_for_step(dir / "run", 1, 1, 8, seconds(40));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  const double stopped_at = now_unix();
  ASSERT_EQ(kill(static_cast<pid_t>(beat->pid), SIGSTOP), 0);

  ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  EXPECT_NE(output.find("hang detected: rank 1 on "), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 2u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "hang");
  EXPECT_EQ(json_number(attempts[0], "rank"), 1);
  // Detected within the hang timeout (+1 s for the heartbeat interval and polling).
  const double detected_after = json_number(attempts[0], "failure_noticed") - stopped_at;
  EXPECT_GE(detected_after, hang_timeout - 0.2);
  EXPECT_LE(detected_after, hang_timeout + 1.0);
}

TEST(LauncherFaults, ARankStuckOutsideCollectivesIsNamedAsTheLaggard) {
  const int ranks = 2;
  const std::string expected = reference_checksum(ranks, kWorker);
  ScratchDir dir("laggard");
  Launch launch(launcher_args(dir, ranks, {"--hang-timeout", "1500ms"}),
                with(kWorker, {"--hang-at-step", "12", "--hang-rank", "0"}), dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  // Rank 0 never issues step 12's all-reduce; rank 1 waits inside it with a higher sequence number.
  EXPECT_NE(output.find("laggard rank 0 on "), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 2u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "hang");
  EXPECT_EQ(json_number(attempts[0], "rank"), 0);
}

// One step of 2.5 s after 30 ms steps: with a derived hang timeout of max(500 ms, 1 x the slowest step) that is a
// stall, and the attempt is relaunched. With --hang-timeout 0 (hang detection off) the same run just finishes.
TEST(LauncherFaults, HangTimeoutZeroDisablesHangDetection) {
  const int ranks = 2;
  const std::vector<std::string> worker = with(kWorker, {"--slow-at-step", "10", "--slow-step-ms", "2500"});
  const std::string expected = reference_checksum(ranks, kWorker);
  const std::vector<std::string> derived = {"--hang-timeout-min", "500ms", "--hang-factor", "1"};
  {
    ScratchDir dir("hang-derived");
    Launch launch(launcher_args(dir, ranks, derived), worker, dir / "out.txt");
    ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
    auto attempts = ledger_lines(dir / "run", "attempt");
    ASSERT_EQ(attempts.size(), 2u) << "the slow step must be a hang when detection is on:\n" << launch.output();
    EXPECT_EQ(json_string(attempts[0], "outcome"), "hang");
  }
  ScratchDir dir("hang-off");
  Launch launch(launcher_args(dir, ranks, with(derived, {"--hang-timeout", "0"})), worker, dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  EXPECT_EQ(output.find("hang detected"), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 1u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "success");
  EXPECT_EQ(json_number(attempts[0], "hang_timeout_s"), 0.0);
}

TEST(LauncherFaults, SigtermToTheLauncherCheckpointsExits75AndASecondRunResumes) {
  const int ranks = 2;
  const std::vector<std::string> worker = {"--steps", "40", "--checkpoint-every", "7", "--step-ms", "30"};
  const std::string expected = reference_checksum(ranks, worker);
  ScratchDir dir("preempt");
  long long stop_step = -1;
  {
    Launch first(launcher_args(dir, ranks), worker, dir / "out1.txt");
    auto beat = wait_for_step(dir / "run", 0, 1, 10, seconds(40));
    ASSERT_TRUE(beat.has_value()) << first.output();
    ASSERT_EQ(kill(first.pid(), SIGTERM), 0);
    ASSERT_EQ(first.wait(seconds(60)), 75) << first.output();
    const std::string output = first.output();
    EXPECT_EQ(final_checksum(output), "") << "the first run must stop early";
    EXPECT_NE(output.find("preempted, emergency checkpoint at step"), std::string::npos) << output;
    auto attempts = ledger_lines(dir / "run", "attempt");
    ASSERT_EQ(attempts.size(), 1u) << output;
    EXPECT_EQ(json_string(attempts[0], "outcome"), "preempted");
    stop_step = static_cast<long long>(json_number(attempts[0], "max_step"));
    // The emergency checkpoint is at the step the ranks stopped at: nothing is lost.
    EXPECT_EQ(json_number(attempts[0], "checkpoint_step"), stop_step);
    EXPECT_EQ(json_number(attempts[0], "work_lost_s"), 0.0);
    EXPECT_GE(stop_step, 10);
    EXPECT_LT(stop_step, 40);
  }
  Launch second(launcher_args(dir, ranks), worker, dir / "out2.txt");
  ASSERT_EQ(second.wait(seconds(60)), 0) << second.output();
  const std::string output = second.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  EXPECT_NE(output.find("attempt 2 resumed at step " + std::to_string(stop_step)), std::string::npos) << output;
  EXPECT_EQ(ledger_lines(dir / "run", "start").size(), 2u);
}

// Once every rank's exit record says 75 the attempt is over, whatever its processes still do: mpirun, when the first
// rank exits 75, takes it for an abort and waits its 1 s kill timeout once or twice while ranks not yet exited stay
// alive. Here no rank exits at all after its record (all linger); the launcher must still end the attempt as a clean
// preemption instead of waiting out --preempt-grace (120 s; the wait below gives up after 60 s) and calling the
// ranks killed.
TEST(LauncherFaults, AnAttemptEndsOnceEveryRankRecordedExit75WhateverItsProcessesStillDo) {
  const int ranks = 2;
  ScratchDir dir("preempt-linger");
  Launch launch(launcher_args(dir, ranks),
                {"--steps", "400", "--checkpoint-every", "7", "--step-ms", "30", "--linger-after-preemption", "1"},
                dir / "out.txt");
  ASSERT_TRUE(wait_for_step(dir / "run", 0, 1, 5, seconds(40)).has_value()) << launch.output();
  ASSERT_EQ(kill(launch.pid(), SIGTERM), 0);
  ASSERT_EQ(launch.wait(seconds(60)), 75) << launch.output();
  const std::string output = launch.output();
  const auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 1u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "preempted") << attempts[0];
  EXPECT_EQ(output.find("--preempt-grace were killed"), std::string::npos) << output;
  EXPECT_NE(output.find("2 of 2 ranks exited with the preempted code 75"), std::string::npos) << output;
}

// A preemption during which a rank is killed in the middle of the emergency checkpoint (rank 0, after writing the data
// and before the commit: step_<N>.tmp is left) is no clean preemption: the attempt is a crash of that rank in the
// ledger and the summary. Once every such ending was reported as "preempted after the emergency checkpoint", with 0
// failures. The launcher still exits 75 (it was asked to stop; relaunching now would ignore the request), and the next
// run resumes from the newest committed checkpoint, before the lost emergency one.
TEST(LauncherFaults, ARankKilledDuringTheEmergencyCheckpointIsAFailureNotACleanPreemption) {
  const int ranks = 2;
  const std::vector<std::string> worker = {"--steps",   "40", "--checkpoint-every",  "7",
                                           "--step-ms", "30", "--checkpoint-layout", "dirs"};
  const std::string expected = reference_checksum(ranks, worker);
  ScratchDir dir("preempt-killed");
  {
    Launch first(launcher_args(dir, ranks), with(worker, {"--die-in-emergency-checkpoint", "0"}), dir / "out1.txt");
    auto beat = wait_for_step(dir / "run", 0, 1, 10, seconds(40));
    ASSERT_TRUE(beat.has_value()) << first.output();
    ASSERT_EQ(kill(first.pid(), SIGTERM), 0);
    ASSERT_EQ(first.wait(seconds(60)), 75) << first.output();
    const std::string output = first.output();
    EXPECT_EQ(output.find("after the emergency checkpoint"), std::string::npos) << output;
    EXPECT_NE(output.find("attempt 1 crash: rank 0 on "), std::string::npos) << output;
    EXPECT_NE(output.find("during the emergency checkpoint"), std::string::npos) << output;
    EXPECT_NE(output.find("1 failure(s), 0 preemption(s)"), std::string::npos) << output;
    auto attempts = ledger_lines(dir / "run", "attempt");
    ASSERT_EQ(attempts.size(), 1u) << output;
    EXPECT_EQ(json_string(attempts[0], "outcome"), "crash");
    EXPECT_EQ(json_number(attempts[0], "rank"), 0);
    const double stop_step = json_number(attempts[0], "max_step");
    const double committed = json_number(attempts[0], "checkpoint_step");
    EXPECT_GT(json_number(attempts[0], "work_lost_s"), 0.0);
    // Rank 0 was killed in the middle of the emergency checkpoint: its step_<N>.tmp is left, never committed. (The
    // heartbeats may not have reported step N itself before the kill.)
    std::vector<std::string> unfinished;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "ckpt")) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".tmp")) unfinished.push_back(name);
    }
    ASSERT_EQ(unfinished.size(), 1u) << output;
    const long long emergency_step = std::stoll(unfinished[0].substr(5, unfinished[0].size() - 9));
    EXPECT_GE(static_cast<double>(emergency_step), stop_step);
    EXPECT_LT(committed, static_cast<double>(emergency_step));
    EXPECT_FALSE(std::filesystem::exists(dir / ("ckpt/step_" + std::to_string(emergency_step))));
    auto end = ledger_lines(dir / "run", "end");
    ASSERT_EQ(end.size(), 1u);
    EXPECT_EQ(json_number(end[0], "exit_code"), 75);
    EXPECT_NE(json_string(end[0], "reason").find("emergency checkpoint"), std::string::npos) << end[0];
  }
  Launch second(launcher_args(dir, ranks), worker, dir / "out2.txt");
  ASSERT_EQ(second.wait(seconds(60)), 0) << second.output();
  EXPECT_EQ(final_checksum(second.output()), expected) << second.output();
  const auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_LT(json_number(attempts[1], "resumed_step"), json_number(attempts[0], "max_step"));
}

// The same with no relaunch left: the failure during the emergency checkpoint uses the last one up, and the launcher
// gives up (exit 70) instead of asking to be run again.
TEST(LauncherFaults, AFailedEmergencyCheckpointWithNoRelaunchLeftGivesUp) {
  ScratchDir dir("preempt-killed-last");
  Launch launch(launcher_args(dir, 2, {"--max-restarts", "0"}),
                with(kWorker, {"--checkpoint-layout", "dirs", "--die-in-emergency-checkpoint", "1"}), dir / "out.txt");
  auto beat = wait_for_step(dir / "run", 0, 1, 8, seconds(40));
  ASSERT_TRUE(beat.has_value()) << launch.output();
  ASSERT_EQ(kill(launch.pid(), SIGTERM), 0);
  ASSERT_EQ(launch.wait(seconds(60)), 70) << launch.output();
  const std::string output = launch.output();
  EXPECT_NE(output.find("attempt 1 crash: rank 1 on "), std::string::npos) << output;
  EXPECT_NE(output.find("gave up: --max-restarts 0"), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 1u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "crash");
}

// Bytes that are not UTF-8, in a program argument and in a line a rank prints that reads as a process manager's
// report (so its node name lands in the ledger): the ledger once took them as they were, its strict reader then
// refused the file, and tenax-launch ended with exit 70 after a successful run — and in every later run of the same
// run directory.
TEST(LauncherFaults, BytesThatAreNotUtf8CannotSpoilTheLedger) {
  const int ranks = 2;
  const std::string expected = reference_checksum(ranks, kWorker);
  ScratchDir dir("not-utf8");
  const std::string fake_report =
      "srun: error: n\xff\xfe"
      "1: task 1: Killed";
  const auto launch_args = launcher_args(dir, ranks);
  const auto worker = with(kWorker, {"--say-at-step", "3", "--say", fake_report});
  {
    Launch launch(launch_args, worker, dir / "out1.txt");
    ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
    EXPECT_EQ(final_checksum(launch.output()), expected) << launch.output();
  }
  // Every line reads with the strict JSON reader (ledger_lines throws otherwise).
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(json_string(attempts[0], "node"),
            "n\xef\xbf\xbd\xef\xbf\xbd"
            "1")
      << "each byte that is not UTF-8 is U+FFFD";
  const auto starts = ledger_lines(dir / "run", "start");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_NE(json_string(starts[0], "program")
                .find("srun: error: n\xef\xbf\xbd\xef\xbf\xbd"
                      "1"),
            std::string::npos);
  // The next run of the same run directory reads the ledger.
  Launch again(launch_args, kWorker, dir / "out2.txt");
  ASSERT_EQ(again.wait(seconds(60)), 0) << again.output();
}

TEST(LauncherFaults, ACrashOnEveryAttemptStopsAfterMaxRestarts) {
  ScratchDir dir("crashloop");
  Launch launch(launcher_args(dir, 2, {"--max-restarts", "2", "--no-progress-limit", "10"}),
                with(kWorker, {"--crash-at-step", "4", "--crash-rank", "1"}), dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 70) << launch.output();
  const std::string output = launch.output();
  EXPECT_NE(output.find("gave up: --max-restarts 2 relaunches used"), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 3u) << output;
  for (const auto& attempt : attempts) {
    EXPECT_EQ(json_string(attempt, "outcome"), "crash") << attempt;
    EXPECT_EQ(json_number(attempt, "rank"), 1) << attempt;
  }
}

TEST(LauncherFaults, AttemptsWithoutProgressStopAsARestartLoop) {
  ScratchDir dir("noprogress");
  Launch launch(
      launcher_args(dir, 2, {"--max-restarts", "10", "--no-progress-limit", "2", "--heartbeat-interval", "10ms"}),
      with(kWorker, {"--crash-at-step", "8", "--crash-rank", "0"}), dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 71) << launch.output();
  const std::string output = launch.output();
  EXPECT_NE(output.find("restart loop: 2 consecutive attempts committed no new checkpoint (newest committed step 5)"),
            std::string::npos)
      << output;
  // Every attempt resumes at 5 and dies at 8. This worker keeps its own checkpoint files, so the launcher learns of
  // the commit at step 5 from the heartbeats (written every 10 ms here, 30 ms steps) or, at the latest, from the next
  // attempt resuming there. Once it knows, two attempts without a newer checkpoint stop the run: 3 or 4 attempts,
  // far below the 11 that --max-restarts 10 would allow.
  const auto attempts = ledger_lines(dir / "run", "attempt");
  EXPECT_GE(attempts.size(), 3u) << output;
  EXPECT_LE(attempts.size(), 4u) << output;
  for (const auto& attempt : attempts)
    EXPECT_EQ(json_string(attempt, "progress_by"), "checkpoint") << attempt;
}

// The worker gets further on every attempt (its crash step moves by 6) but never commits a checkpoint: every restart
// goes back to step 0. The highest heartbeat step rises each time, which once kept this loop going until
// --max-restarts; the newest committed checkpoint does not, so the loop is stopped after --no-progress-limit attempts.
TEST(LauncherFaults, HeartbeatProgressWithoutANewCommittedCheckpointIsARestartLoop) {
  ScratchDir dir("nocommit");
  Launch launch(
      launcher_args(dir, 2, {"--max-restarts", "10", "--no-progress-limit", "2", "--heartbeat-interval", "10ms"}),
      {"--steps", "80", "--checkpoint-every", "1000", "--step-ms", "30", "--checkpoint-layout", "dirs",
       "--crash-at-step", "6", "--crash-step-growth", "6", "--crash-rank", "1"},
      dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 71) << launch.output();
  const std::string output = launch.output();
  EXPECT_NE(output.find("restart loop: 2 consecutive attempts committed no new checkpoint (newest committed step 0)"),
            std::string::npos)
      << output;
  const auto attempts = ledger_lines(dir / "run", "attempt");
  // The first attempt counts as progress (from nothing to the start of training), the next two do not.
  ASSERT_EQ(attempts.size(), 3u) << output;
  double previous_max_step = -1;
  for (const auto& attempt : attempts) {
    EXPECT_EQ(json_string(attempt, "outcome"), "crash") << attempt;
    EXPECT_EQ(json_number(attempt, "checkpoint_step"), 0) << attempt;
    EXPECT_EQ(json_string(attempt, "progress_by"), "checkpoint") << attempt;
    // Each attempt was seen getting further than the one before: heartbeat progress, all of it lost.
    EXPECT_GT(json_number(attempt, "max_step"), previous_max_step) << attempt;
    EXPECT_GT(json_number(attempt, "work_lost_s"), 0) << attempt;
    previous_max_step = json_number(attempt, "max_step");
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt/latest")) << "no checkpoint was ever committed";
}

// The worker crashes on every attempt but commits a new checkpoint before each crash (every 5 steps; the crash step
// moves by 5). With --no-progress-limit 1 a single attempt without a new commit would stop the run; none does, so it
// finishes with the uninterrupted run's parameters. Heartbeats are written only every second here, too rarely to
// report the commits before the crashes: the launcher sees them in the checkpoint directory itself.
TEST(LauncherFaults, AttemptsThatCommitNewCheckpointsBetweenCrashesAreNotARestartLoop) {
  const int ranks = 2;
  const std::string expected = reference_checksum(ranks, kWorker);
  ScratchDir dir("commits");
  Launch launch(
      launcher_args(dir, ranks, {"--max-restarts", "10", "--no-progress-limit", "1", "--heartbeat-interval", "1s"}),
      with(kWorker,
           {"--checkpoint-layout", "dirs", "--crash-at-step", "8", "--crash-step-growth", "5", "--crash-rank", "1"}),
      dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(90)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_EQ(final_checksum(output), expected) << output;
  const auto attempts = ledger_lines(dir / "run", "attempt");
  // Crashes at steps 8, 13, 18, 23 and 28 after checkpoints 5, 10, 15, 20 and 25; the sixth attempt finishes.
  ASSERT_EQ(attempts.size(), 6u) << output;
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    SCOPED_TRACE(attempts[i]);
    EXPECT_EQ(json_string(attempts[i], "outcome"), i + 1 < attempts.size() ? "crash" : "success");
    EXPECT_EQ(json_number(attempts[i], "checkpoint_step"), 5.0 * static_cast<double>(i + 1));
    EXPECT_EQ(json_number(attempts[i], "resumed_step"), 5.0 * static_cast<double>(i));
  }
  EXPECT_EQ(read_text(dir / "ckpt/latest"), "step_30\n");
}

// A run directory that fills up takes the ranks' heartbeats and exit records with it: the attempt looks like a crash
// whatever the ranks did, and a relaunch would fail the same way. The run stops at once, naming the directory.
TEST(LauncherFaults, ARunDirectoryThatFilledUpStopsTheRunNamingIt) {
  ScratchDir dir("fullrundir");
  const std::string run = dir / "run";
  std::filesystem::create_directories(run);
  if (::mount("tmpfs", run.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): " << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{run};
  {  // full but for two pages: the launcher's lock file and first ledger record fit, the ranks' records do not
    std::ofstream filler(run + "/filler", std::ios::binary);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) && filler.flush()) {
    }
  }
  std::filesystem::resize_file(run + "/filler", std::filesystem::file_size(run + "/filler") - 8192);
  Launch launch(launcher_args(dir, 2, {"--max-restarts", "5"}), kWorker, dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 70) << launch.output();
  const std::string output = launch.output();
  EXPECT_NE(output.find("the run directory '" + run + "' cannot be written (No space left on device)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("free space on its file system or give another --run-dir"), std::string::npos) << output;
  EXPECT_EQ(output.find("attempt 2"), std::string::npos) << "no relaunch:\n" << output;
}

// Waits until process `pid` (not a child of this one) has ended, on the kernel's word: a pidfd turns readable when
// its process exits; one already reaped cannot be opened (ESRCH). False when it still runs at `deadline`.
bool ended_by(long pid, std::chrono::steady_clock::time_point deadline) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (fd < 0) return errno == ESRCH;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  pollfd ready{fd, POLLIN, 0};
  int polled;
  do
    polled = ::poll(&ready, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
  while (polled < 0 && errno == EINTR);
  ::close(fd);
  return polled == 1;
}

// Waits until the file at `path` (which exists) holds `text`, on the kernel's word that it was written (inotify).
bool file_gets_text(const std::string& path, const std::string& text, std::chrono::seconds limit) {
  const int watch = ::inotify_init1(IN_CLOEXEC);
  if (watch < 0 || ::inotify_add_watch(watch, path.c_str(), IN_MODIFY) < 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool found = false;
  alignas(inotify_event) char events[4096];
  while (!(found = read_text(path).find(text) != std::string::npos)) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd readable{watch, POLLIN, 0};
    if (left <= 0 || ::poll(&readable, 1, static_cast<int>(left)) != 1) break;
    if (::read(watch, events, sizeof events) < 0) break;
  }
  ::close(watch);
  return found;
}

// One launcher per run directory and per checkpoint directory: a second is refused before it writes anything there,
// naming the first. A launcher killed by SIGKILL leaves neither its lock nor its ranks behind, and the next one
// resumes to the uninterrupted run's result.
TEST(LauncherFaults, ADirectoryInUseIsRefusedAndAKilledLaunchersRanksDoNotOutliveIt) {
  const int ranks = 2;
  const std::vector<std::string> worker = {"--steps", "40", "--checkpoint-every", "5", "--step-ms", "30"};
  const std::string expected = reference_checksum(ranks, worker);
  ScratchDir dir("inuse");
  // The first run's step 8 takes 100 s (hang detection off): it is surely alive while the others try.
  Launch first(launcher_args(dir, ranks, {"--hang-timeout", "0"}),
               with(worker, {"--slow-at-step", "8", "--slow-step-ms", "100000"}), dir / "out1.txt");
  ASSERT_TRUE(wait_for_step(dir / "run", 0, 1, 7, seconds(40)).has_value()) << first.output();
  ASSERT_TRUE(wait_for_step(dir / "run", 1, 1, 7, seconds(40)).has_value()) << first.output();

  Launch same_run({"-n", "2", "--run-dir", dir / "run", "--checkpoint-dir", dir / "ckpt2"}, worker, dir / "out2.txt");
  ASSERT_EQ(same_run.wait(seconds(30)), 64) << same_run.output();
  EXPECT_NE(same_run.output().find("--run-dir '" + dir / "run" + "' is in use by another tenax-launch (pid " +
                                   std::to_string(first.pid()) + " on host "),
            std::string::npos)
      << same_run.output();
  EXPECT_NE(same_run.output().find("remove " + dir / "run" + "/tenax-launch.lock"), std::string::npos)
      << same_run.output();
  Launch same_checkpoints({"-n", "2", "--run-dir", dir / "run3", "--checkpoint-dir", dir / "ckpt"}, worker,
                          dir / "out3.txt");
  ASSERT_EQ(same_checkpoints.wait(seconds(30)), 64) << same_checkpoints.output();
  EXPECT_NE(same_checkpoints.output().find("--checkpoint-dir '" + dir / "ckpt" + "' is in use"), std::string::npos)
      << same_checkpoints.output();
  EXPECT_EQ(ledger_lines(dir / "run", "start").size(), 1u) << "the refused launcher wrote to the ledger";
  EXPECT_FALSE(std::filesystem::exists(dir / "run3/ledger.jsonl"));
  // The checkpoint directory removed by hand took the lock file with it: the first launcher locks it again while
  // its attempt runs, and a launcher started after that is still refused.
  std::filesystem::remove_all(dir / "ckpt");
  ASSERT_TRUE(file_gets_text(dir / "out1.txt", "was removed while this run held it", seconds(30))) << first.output();
  Launch after_removal({"-n", "2", "--run-dir", dir / "run5", "--checkpoint-dir", dir / "ckpt"}, worker,
                       dir / "out5.txt");
  ASSERT_EQ(after_removal.wait(seconds(30)), 64) << after_removal.output();
  EXPECT_NE(after_removal.output().find("--checkpoint-dir '" + dir / "ckpt" + "' is in use"), std::string::npos)
      << after_removal.output();

  std::vector<long> rank_pids;
  for (int rank = 0; rank < ranks; ++rank) {
    auto beat = read_beat(dir / "run", 1, rank);
    ASSERT_TRUE(beat.has_value());
    rank_pids.push_back(beat->pid);
  }
  ASSERT_EQ(kill(first.pid(), SIGKILL), 0);
  first.wait(seconds(10));
  // Without their launcher the ranks must end (mpirun gets SIGTERM from the kernel when the launcher dies) instead of
  // sleeping out their 100 s step and training on, unsupervised, into the directories of the next launcher.
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  const bool gone = std::all_of(rank_pids.begin(), rank_pids.end(), [&](long pid) { return ended_by(pid, deadline); });
  if (!gone) {
    for (const long pid : rank_pids)
      kill(static_cast<pid_t>(pid), SIGKILL);  // a failed test must not leave ranks behind
  }
  ASSERT_TRUE(gone) << "ranks of the killed launcher still run";

  // The killed launcher's attempt has no record; the next launcher numbers its own after it (reusing its number
  // overwrote that attempt's files). The slow step is left out: it changes timing, not results. The checkpoints
  // removed above are gone, so the run starts over, to the same result.
  Launch next(launcher_args(dir, ranks), worker, dir / "out4.txt");
  ASSERT_EQ(next.wait(seconds(60)), 0) << next.output();
  EXPECT_NE(next.output().find("warning: attempt 1 has no record in the ledger"), std::string::npos) << next.output();
  EXPECT_NE(next.output().find("attempt 2: starting"), std::string::npos) << next.output();
  EXPECT_EQ(final_checksum(next.output()), expected) << next.output();
  EXPECT_EQ(ledger_lines(dir / "run", "start").size(), 2u);
}

TEST(LauncherFaults, AUsageErrorOfTheProgramIsNotRetried) {
  ScratchDir dir("usage");
  Launch launch(launcher_args(dir, 2), {"--steps", "-5"}, dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 64) << launch.output();
  const std::string output = launch.output();
  EXPECT_NE(output.find("usage errors are never retried"), std::string::npos) << output;
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 1u) << output;
  EXPECT_EQ(json_string(attempts[0], "outcome"), "usage-error");
}

TEST(LauncherFaults, ABadLauncherArgumentFailsBeforeAnythingStarts) {
  ScratchDir dir("badarg");
  Launch launch({"-n", "2", "--run-dir", dir / "run", "--max-restarts", "many"}, kWorker, dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(30)), 64) << launch.output();
  EXPECT_NE(launch.output().find("--max-restarts"), std::string::npos) << launch.output();
  EXPECT_FALSE(std::filesystem::exists(dir / "run")) << "nothing may start before the arguments are checked";
}

TEST(LauncherFaults, ABadTenaxVariableFailsBeforeAnythingStarts) {
  ScratchDir dir("badenv");
  setenv("TENAX_HEARTBEAT_INTERVL", "1s", 1);  // a typo
  Launch launch({"-n", "2", "--run-dir", dir / "run"}, kWorker, dir / "out.txt");
  unsetenv("TENAX_HEARTBEAT_INTERVL");
  ASSERT_EQ(launch.wait(seconds(30)), 64) << launch.output();
  EXPECT_NE(launch.output().find("TENAX_HEARTBEAT_INTERVL"), std::string::npos) << launch.output();
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(LauncherFaults, TheEndOfRunSummaryReportsGoodput) {
  ScratchDir dir("summary");
  Launch launch(launcher_args(dir, 2), kWorker, dir / "out.txt");
  ASSERT_EQ(launch.wait(seconds(60)), 0) << launch.output();
  const std::string output = launch.output();
  EXPECT_NE(output.find("tenax-launch: goodput "), std::string::npos) << output;
  EXPECT_NE(output.find("productive steps"), std::string::npos) << output;
  auto end = ledger_lines(dir / "run", "end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(json_number(end[0], "exit_code"), 0);
  auto attempts = ledger_lines(dir / "run", "attempt");
  ASSERT_EQ(attempts.size(), 1u);
  // 30 steps of >= 30 ms each were productive.
  EXPECT_GE(json_number(attempts[0], "productive_s"), 0.9);
}

}  // namespace
}  // namespace tenax::test
