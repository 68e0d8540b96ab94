#include <gtest/gtest.h>

#include <csignal>

#include "classify.hpp"
#include "tenax/runtime.hpp"

namespace tenax::launch {
namespace {

Heartbeat rank_beat(int rank, int exit_code, std::int64_t step = 10) {
  Heartbeat h;
  h.rank = rank;
  h.node = "n" + std::to_string(rank);
  h.exit_code = exit_code;
  h.step = step;
  return h;
}

TEST(Classify, AllRanksFinished) {
  AttemptEvidence e;
  e.manager_exit_code = 0;
  e.beats = {rank_beat(0, 0), rank_beat(1, 0)};
  EXPECT_EQ(classify(e).outcome, Outcome::Success);
}

TEST(Classify, AUsageErrorOfAnyRankWins) {
  AttemptEvidence e;
  e.manager_exit_code = 1;
  e.beats = {rank_beat(0, -1), rank_beat(1, 64)};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Usage);
  EXPECT_EQ(c.rank, 1);
  EXPECT_NE(c.summary.find("usage-error code 64"), std::string::npos);
}

TEST(Classify, AUsageErrorBeforeAnyHeartbeatIsKnownFromTheProcessManager) {
  AttemptEvidence e;
  e.manager_signal = SIGKILL;  // torn down by the launcher right after the report
  e.first_event = FailureEvent{FailureEvent::Kind::ExitCode, 1, "", 64, "Exit code:    64"};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Usage);
  EXPECT_EQ(c.rank, 1);
}

// A layout the step cannot hold fails every attempt the same way: stop with the usage code instead of retrying
// (each retry once ran into the start-up timeout).
TEST(Classify, TheStepRefusedByThePluginIsAUsageErrorNeverRetried) {
  AttemptEvidence e;
  e.manager_exit_code = 1;
  e.first_event =
      FailureEvent{FailureEvent::Kind::Refused, -1, "", 0,
                   "slurmstepd: error: tenax: --tenax-layout=tp=2,pp=1,dp=8: tp*pp*dp = 16 but the step has 8"};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Usage);
  EXPECT_NE(c.summary.find("tp*pp*dp = 16 but the step has 8"), std::string::npos) << c.summary;
  Options options;
  const Decision d = decide(options, c, 0, ProgressState{});
  EXPECT_EQ(d.action, Decision::Action::Stop);
  EXPECT_EQ(d.exit_code, tenax::kExitUsage);
}

TEST(Classify, ARankThatVanishedIsTheCrashCulprit) {
  AttemptEvidence e;
  e.manager_exit_code = 137;
  e.beats = {rank_beat(0, -1), rank_beat(1, -1), rank_beat(2, -1)};
  e.first_dead_rank = 2;
  e.first_event = FailureEvent{FailureEvent::Kind::Signal, 2, "vm", SIGKILL, "..."};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Crash);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.node, "n2");
  EXPECT_NE(c.summary.find("SIGKILL"), std::string::npos) << c.summary;
}

TEST(Classify, TheProcessManagersReportNamesTheRankOtherwise) {
  AttemptEvidence e;
  e.manager_exit_code = 1;
  e.first_event =
      FailureEvent{FailureEvent::Kind::ExitCode, 3, "n7", 1, "srun: error: n7: task 3: Exited with exit code 1"};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Crash);
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.node, "n7");
}

TEST(Classify, ALostNodeIsItsOwnOutcome) {
  AttemptEvidence e;
  e.manager_exit_code = 1;
  e.first_event = FailureEvent{FailureEvent::Kind::NodeLost, -1, "n4", 0, "srun: error: Node failure on n4"};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::NodeLost);
  EXPECT_TRUE(c.node_lost);
  EXPECT_EQ(c.node, "n4");
}

TEST(Classify, AHangVerdictBlamesItsFirstRank) {
  AttemptEvidence e;
  e.hang = HangVerdict{HangVerdict::Kind::Silent, {1}, {"n1"}, "rank 1 on n1 silent for 3.0 s"};
  e.manager_signal = SIGKILL;
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Hang);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.node, "n1");
}

// The hang timeout often fires before Slurm declares a dead node down (SlurmdTimeout); srun's "Node failure" report
// then arrives during the teardown the hang started. The node is still what failed: excluded, not a hang's strike.
TEST(Classify, ANodeFailureReportedAfterAHangVerdictIsTheLostNode) {
  AttemptEvidence e;
  e.hang = HangVerdict{HangVerdict::Kind::Stalled, {0}, {"n0"}, "no progress for 9.0 s: laggard rank 0 on n0"};
  e.manager_exit_code = 1;
  e.lost_nodes = {FailureEvent{FailureEvent::Kind::NodeLost, -1, "n3", 0, "srun: error: Node failure on n3"}};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::NodeLost);
  EXPECT_TRUE(c.node_lost);
  EXPECT_EQ(c.node, "n3") << "the healthy laggard's node must not be blamed";
  EXPECT_NE(c.summary.find("hang detector had stopped the attempt first"), std::string::npos) << c.summary;
}

// A peer of the lost node notices first (exit 76, or killed) and is reported first; the node failure comes later.
TEST(Classify, ANodeFailureReportedAfterAPeerFailureIsTheLostNode) {
  AttemptEvidence e;
  e.manager_exit_code = 1;
  e.first_event =
      FailureEvent{FailureEvent::Kind::ExitCode, 2, "n1", 76, "srun: error: n1: task 2: Exited with exit code 76"};
  e.beats = {rank_beat(0, -1), rank_beat(1, -1), rank_beat(2, 76), rank_beat(3, -1)};
  e.lost_nodes = {FailureEvent{FailureEvent::Kind::NodeLost, -1, "n3", 0, "srun: error: Node failure on n3"}};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::NodeLost);
  EXPECT_EQ(c.node, "n3");
}

// Before Slurm reports anything: every rank of one node silent while the others beat.
TEST(Classify, AWhollySilentNodeIsLostNotHung) {
  AttemptEvidence e;
  e.hang = HangVerdict{HangVerdict::Kind::Silent, {2, 3}, {"n2", "n2"}, "rank 2 on n2 silent ...", {"n2"}};
  e.manager_signal = SIGKILL;
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::NodeLost);
  EXPECT_TRUE(c.node_lost);
  EXPECT_EQ(c.node, "n2");
  EXPECT_EQ(c.rank, 2);
}

// Open MPI on a healthy node aborts first on an unreachable peer; the probe after the failure finds the node that does
// not answer. The node is lost; the crash it caused is kept in the summary.
TEST(Classify, ANodeThatDoesNotAnswerAfterACrashIsTheLostNode) {
  AttemptEvidence e;
  e.manager_exit_code = 1;
  e.first_event = FailureEvent{FailureEvent::Kind::Signal, 0, "n1", 9, "srun: error: n1: tasks 0-1: Killed"};
  e.beats = {rank_beat(0, -1), rank_beat(1, -1), rank_beat(2, -1), rank_beat(3, -1)};
  EXPECT_EQ(classify(e).node, "n1") << "without the probe the reported rank's node is blamed";
  e.unreachable_nodes = {"n2"};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::NodeLost);
  EXPECT_TRUE(c.node_lost);
  EXPECT_EQ(c.node, "n2");
  EXPECT_EQ(c.rank, -1);
  EXPECT_NE(c.summary.find("followed from it: rank 0 on n1 was killed by signal 9"), std::string::npos) << c.summary;
}

// A link throttled to a trickle: every rank waits in a collective until the hang timeout, no rank or node stands out,
// and the probe finds one node answering far slower than the others. That node is lost (excluded), with the hang kept
// in the summary; without the probe's answer nobody is blamed.
TEST(Classify, ANodeAnsweringFarSlowerAfterAStallIsTheLostNode) {
  AttemptEvidence e;
  e.manager_exit_code = 1;
  e.hang = HangVerdict{HangVerdict::Kind::Stalled, {}, {}, "no progress for 5.0 s: all ranks stuck together"};
  e.beats = {rank_beat(0, -1), rank_beat(1, -1), rank_beat(2, -1), rank_beat(3, -1)};
  EXPECT_EQ(classify(e).outcome, Outcome::Hang);
  EXPECT_TRUE(classify(e).node.empty());
  e.slow_nodes = {SlowNode{"n2", 152.5, 0.1}};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::NodeLost);
  EXPECT_TRUE(c.node_lost);
  EXPECT_EQ(c.node, "n2");
  EXPECT_NE(c.summary.find("only after 152.5 ms (the nodes' median 0.1 ms)"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("followed from it: no progress for 5.0 s"), std::string::npos) << c.summary;
  // A node that does not answer at all is the surer sign, and a whole node of silent ranks too.
  e.unreachable_nodes = {"n3"};
  EXPECT_EQ(classify(e).node, "n3");
  e.unreachable_nodes.clear();
  e.hang = HangVerdict{HangVerdict::Kind::Silent, {2, 3}, {"n4", "n4"}, "rank 2 on n4 silent ...", {"n4"}};
  EXPECT_EQ(classify(e).node, "n4");
}

// A program may print anything, a node-failure line too: an attempt whose ranks all finished is still a success.
TEST(Classify, ANodeFailureLineInASuccessfulRunChangesNothing) {
  AttemptEvidence e;
  e.manager_exit_code = 0;
  e.beats = {rank_beat(0, 0), rank_beat(1, 0)};
  e.lost_nodes = {FailureEvent{FailureEvent::Kind::NodeLost, -1, "n3", 0, "srun: error: Node failure on n3"}};
  EXPECT_EQ(classify(e).outcome, Outcome::Success);
}

TEST(Classify, PreemptionAfterTheLauncherForwardedTheSignal) {
  AttemptEvidence e;
  e.preemption_forwarded = true;
  e.manager_exit_code = 75;
  e.beats = {rank_beat(0, 75), rank_beat(1, 75)};
  e.beats[0].checkpoint_step = 12;
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Preempted);
  EXPECT_NE(c.summary.find("2 of 2 ranks"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("step 12"), std::string::npos) << c.summary;
}

// Once the launcher forwarded a preemption, every ending was "preempted after the emergency checkpoint", even when a
// rank died in the middle of it. Only a rank's exit 75 (given once the checkpoint is committed on every rank) makes a
// clean preemption.
TEST(Classify, ARankKilledDuringTheEmergencyCheckpointIsACrash) {
  AttemptEvidence e;
  e.preemption_forwarded = true;
  e.forwarded_signal = SIGUSR1;
  e.manager_exit_code = 137;
  e.beats = {rank_beat(0, -1), rank_beat(1, -1)};
  e.first_dead_rank = 1;
  e.first_event = FailureEvent{FailureEvent::Kind::Signal, 1, "vm", SIGKILL, "..."};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Crash);
  EXPECT_EQ(c.rank, 1);
  EXPECT_TRUE(c.preemption_requested);
  EXPECT_NE(c.summary.find("during the emergency checkpoint"), std::string::npos) << c.summary;
  EXPECT_EQ(c.summary.find("after the emergency checkpoint"), std::string::npos) << c.summary;
  // Seen only in the process manager's report (Slurm mode has no pid check).
  e.first_dead_rank = -1;
  c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Crash);
  EXPECT_EQ(c.rank, 1);
}

TEST(Classify, ARankThatFailsTheEmergencyCheckpointIsTheCulpritNotTheirPeers) {
  AttemptEvidence e;
  e.preemption_forwarded = true;
  e.forwarded_signal = SIGTERM;
  e.manager_exit_code = 1;
  e.beats = {rank_beat(0, 76), rank_beat(1, 1), rank_beat(2, 76)};  // rank 1: disk full while writing
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Crash);
  EXPECT_EQ(c.rank, 1);
  EXPECT_TRUE(c.preemption_requested);
}

TEST(Classify, KillsAfterAConfirmedEmergencyCheckpointAreTheTeardown) {
  // srun kills the other tasks once the first exits 75, and may report those kills first.
  AttemptEvidence e;
  e.preemption_forwarded = true;
  e.forwarded_signal = SIGTERM;
  e.manager_exit_code = 75;
  e.beats = {rank_beat(0, 75), rank_beat(1, -1)};
  e.first_event = FailureEvent{FailureEvent::Kind::Signal, 1, "n2", SIGKILL, "srun: error: n2: task 1: Killed"};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Preempted);
  EXPECT_NE(c.summary.find("1 of 2 ranks exited with the preempted code 75"), std::string::npos) << c.summary;
  // mpirun: its report of the first exit 75.
  e.manager_exit_code = 1;
  e.beats = {rank_beat(0, -1), rank_beat(1, -1)};
  e.first_event = FailureEvent{FailureEvent::Kind::ExitCode, 0, "", 75, "Exit code:    75"};
  EXPECT_EQ(classify(e).outcome, Outcome::Preempted);
}

TEST(Classify, APreemptionWithoutAnyConfirmationIsSaidSo) {
  // The forwarded signal killed a rank that had not installed its handlers yet: documented, no failure.
  AttemptEvidence e;
  e.preemption_forwarded = true;
  e.forwarded_signal = SIGUSR1;
  e.manager_exit_code = 1;
  e.first_event = FailureEvent{FailureEvent::Kind::Signal, 0, "vm", SIGUSR1, "..."};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Preempted);
  EXPECT_NE(c.summary.find("no rank confirmed an emergency checkpoint"), std::string::npos) << c.summary;
  // Ranks still running after --preempt-grace: a hang of the emergency checkpoint.
  e.first_event.reset();
  e.preempt_deadline_passed = true;
  e.beats = {rank_beat(0, -1), rank_beat(1, -1)};
  c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::Hang);
  EXPECT_TRUE(c.preemption_requested);
  EXPECT_NE(c.summary.find("--preempt-grace"), std::string::npos) << c.summary;
}

TEST(Classify, PeerFailureAloneNamesNoOne) {
  AttemptEvidence e;
  e.manager_exit_code = 76;
  e.beats = {rank_beat(0, 76), rank_beat(1, 76)};
  auto c = classify(e);
  EXPECT_EQ(c.outcome, Outcome::PeerFailure);
  EXPECT_EQ(c.rank, -1);
}

Options limits(int max_restarts, int no_progress) {
  Options o;
  o.max_restarts = max_restarts;
  o.no_progress_limit = no_progress;
  o.backoff = std::chrono::milliseconds(1000);
  o.backoff_max = std::chrono::milliseconds(5000);
  return o;
}

TEST(Decide, UsageErrorsAreNeverRetried) {
  Classification c;
  c.outcome = Outcome::Usage;
  auto d = decide(limits(10, 10), c, 0, {ProgressBasis::Checkpoint, 0, 0});
  EXPECT_EQ(d.action, Decision::Action::Stop);
  EXPECT_EQ(d.exit_code, 64);
}

TEST(Decide, FailuresWithoutProgressAreRetriedWithDoublingBackoffUpToTheLimit) {
  Classification c;
  c.outcome = Outcome::Crash;
  auto o = limits(4, 10);
  EXPECT_EQ(decide(o, c, 0, {ProgressBasis::Checkpoint, 1, 0}).backoff.count(), 1000);
  EXPECT_EQ(decide(o, c, 1, {ProgressBasis::Checkpoint, 2, 0}).backoff.count(), 2000);
  EXPECT_EQ(decide(o, c, 2, {ProgressBasis::Checkpoint, 3, 0}).backoff.count(), 4000);
  EXPECT_EQ(decide(o, c, 3, {ProgressBasis::Checkpoint, 4, 0}).backoff.count(), 5000);  // capped at --backoff-max
  auto stop = decide(o, c, 4, {ProgressBasis::Checkpoint, 0, 0});
  EXPECT_EQ(stop.action, Decision::Action::Stop);
  EXPECT_EQ(stop.exit_code, kExitGaveUp);
  EXPECT_NE(stop.reason.find("--max-restarts 4"), std::string::npos);
}

// A run that advances between failures (each failed attempt committed a new checkpoint) is relaunched at once, however
// many failures it has had; the next attempt without progress starts the doubling again from --backoff.
TEST(Decide, AnAttemptThatMadeProgressIsRelaunchedAtOnce) {
  Classification c;
  c.outcome = Outcome::Crash;
  auto o = limits(100, 10);
  for (int failed = 0; failed < 20; ++failed) {
    const Decision d = decide(o, c, failed, {ProgressBasis::Checkpoint, 0, 10 * failed});
    EXPECT_EQ(d.action, Decision::Action::Retry);
    EXPECT_EQ(d.backoff.count(), 0) << "after " << failed << " failures";
    EXPECT_NE(d.reason.find("committed a new checkpoint"), std::string::npos) << d.reason;
  }
  EXPECT_EQ(decide(o, c, 20, {ProgressBasis::Checkpoint, 1, 190}).backoff.count(), 1000);
}

TEST(Decide, NoProgressStopsWithItsOwnCode) {
  Classification c;
  c.outcome = Outcome::Hang;
  auto d = decide(limits(100, 3), c, 5, {ProgressBasis::Checkpoint, 3, 0});
  EXPECT_EQ(d.action, Decision::Action::Stop);
  EXPECT_EQ(d.exit_code, kExitNoProgress);
  EXPECT_EQ(decide(limits(100, 3), c, 5, {ProgressBasis::Checkpoint, 2, 0}).action, Decision::Action::Retry);
}

// A failure during a requested preemption is not relaunched (the launcher was asked to stop) but counted: 75 while
// relaunches are left, the limits' own codes when they are used up.
TEST(Decide, AFailureDuringAPreemptionStopsAndCounts) {
  Classification c;
  c.outcome = Outcome::Crash;
  c.preemption_requested = true;
  auto stop = decide(limits(3, 3), c, 0, {ProgressBasis::Checkpoint, 1, 5});
  EXPECT_EQ(stop.action, Decision::Action::Stop);
  EXPECT_EQ(stop.exit_code, 75);
  EXPECT_NE(stop.reason.find("emergency checkpoint failed"), std::string::npos) << stop.reason;
  EXPECT_EQ(decide(limits(3, 3), c, 3, {ProgressBasis::Checkpoint, 1, 5}).exit_code, kExitGaveUp);
  EXPECT_EQ(decide(limits(3, 3), c, 0, {ProgressBasis::Checkpoint, 3, 5}).exit_code, kExitNoProgress);
}

TEST(Decide, PreemptionStopsWith75AndSuccessFinishes) {
  Classification c;
  c.outcome = Outcome::Preempted;
  EXPECT_EQ(decide(limits(0, 1), c, 0, {ProgressBasis::Checkpoint, 5, 0}).exit_code, 75);
  c.outcome = Outcome::Success;
  EXPECT_EQ(decide(limits(0, 1), c, 0, {ProgressBasis::Checkpoint, 5, 0}).action, Decision::Action::Finish);
}

}  // namespace
}  // namespace tenax::launch
