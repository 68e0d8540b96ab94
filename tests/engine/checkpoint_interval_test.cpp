// The automatic checkpoint interval's arithmetic (engine/checkpoint_interval.hpp): Daly's optimum against values
// worked out by hand, its limits, the conversion to steps, the choice of MTBF and the command-line form.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "engine/checkpoint_interval.hpp"
#include "tenax/engine.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

TEST(CheckpointInterval, DalysOptimumMatchesTheFormula) {
  // C = 10 s, M = 24 h: sqrt(2 C M) = 1314.53 s; C / 2M = 5.787e-5; x (1 + 0.0025358 + 0.0000064) - 10 = 1307.87 s.
  EXPECT_NEAR(daly_interval_s(10, 86400), 1307.87, 0.01);
  // C = 0.003 s, M = 20 s (the end-to-end test's order): sqrt(2 C M) = 0.346410; C / 2M = 7.5e-5, its root 0.0086603;
  // 0.346410 x (1 + 0.0028868 + 0.0000083) - 0.003 = 0.344413 s.
  EXPECT_NEAR(daly_interval_s(0.003, 20), 0.344413, 1e-5);
  // For C << M it tends to Young's sqrt(2 C M) - C.
  EXPECT_NEAR(daly_interval_s(1e-3, 1e6) / std::sqrt(2 * 1e-3 * 1e6), 1.0, 1e-3);
  // A checkpoint as costly as two failure intervals or more: checkpoint once per MTBF.
  EXPECT_DOUBLE_EQ(daly_interval_s(50, 20), 20);
  EXPECT_DOUBLE_EQ(daly_interval_s(40, 20), 20);
  // Shorter between failures, or cheaper checkpoints: a shorter interval.
  EXPECT_LT(daly_interval_s(10, 3600), daly_interval_s(10, 86400));
  EXPECT_LT(daly_interval_s(1, 3600), daly_interval_s(10, 3600));
}

TEST(CheckpointInterval, NonPositiveOrNonFiniteInputsAreRefused) {
  EXPECT_THROW(daly_interval_s(0, 10), UsageError);
  EXPECT_THROW(daly_interval_s(1, 0), UsageError);
  EXPECT_THROW(daly_interval_s(-1, 10), UsageError);
  EXPECT_THROW(daly_interval_s(1, INFINITY), UsageError);
  EXPECT_THROW(daly_interval_s(NAN, 10), UsageError);
}

TEST(CheckpointInterval, StepsAreRoundedAndBounded) {
  EXPECT_EQ(interval_in_steps(1.0, 0.1, 1000), 10);
  EXPECT_EQ(interval_in_steps(1.04, 0.1, 1000), 10);
  EXPECT_EQ(interval_in_steps(1.06, 0.1, 1000), 11);
  EXPECT_EQ(interval_in_steps(0.01, 0.1, 1000), 1) << "at least one step";
  EXPECT_EQ(interval_in_steps(1e9, 0.1, 500), 500) << "at most the run";
  EXPECT_EQ(interval_in_steps(1.0, 0.0, 500), 500) << "steps of no measured time: as rarely as allowed";
}

TEST(CheckpointInterval, ASaveDueWhileThePreviousIsInFlightWaitsForItOneIntervalAtMost) {
  EXPECT_FALSE(automatic_save_now(9, 10, false)) << "not due yet";
  EXPECT_TRUE(automatic_save_now(10, 10, false));
  EXPECT_FALSE(automatic_save_now(10, 10, true)) << "the previous save is still being written: no stall for it";
  EXPECT_FALSE(automatic_save_now(19, 10, true));
  EXPECT_TRUE(automatic_save_now(13, 10, false)) << "taken as soon as the previous one committed";
  EXPECT_TRUE(automatic_save_now(20, 10, true)) << "a write that never ends blocks the save after one more interval";
  EXPECT_FALSE(automatic_save_now(1, 1, true));
  EXPECT_TRUE(automatic_save_now(2, 1, true));
}

TEST(CheckpointInterval, TheMtbfIsTheProgramsThenTheRunsThenTheJobsThenTheSitesPerNode) {
  unsetenv("TENAX_RUN_MTBF");
  unsetenv("TENAX_RUN_SHARED_MTBF");
  unsetenv("TENAX_MTBF");
  unsetenv("TENAX_NODE_MTBF");
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8).seconds, 86400) << "TENAX_MTBF's default: 24 h";
  EXPECT_EQ(choose_mtbf(0, 8).source, "TENAX_MTBF's default");

  // The site's per-node figure: a job on N nodes fails N times as often.
  setenv("TENAX_NODE_MTBF", "720h", 1);
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8).seconds, 720.0 * 3600 / 8);
  EXPECT_EQ(choose_mtbf(0, 8).source, "TENAX_NODE_MTBF (720h) over 8 nodes");
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 1).seconds, 720.0 * 3600);
  EXPECT_EQ(choose_mtbf(0, 1).source, "TENAX_NODE_MTBF (720h) over 1 node");
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 0).seconds, 720.0 * 3600) << "no node count: one node";
  setenv("TENAX_NODE_MTBF", "0", 1);
  EXPECT_EQ(choose_mtbf(0, 8).source, "TENAX_MTBF's default") << "0: no site figure";
  setenv("TENAX_NODE_MTBF", "720h", 1);

  // The job's own figure wins over the site's, even when it equals the default.
  setenv("TENAX_MTBF", "24h", 1);
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8).seconds, 86400);
  EXPECT_EQ(choose_mtbf(0, 8).source, "TENAX_MTBF");
  setenv("TENAX_MTBF", "2h", 1);
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8).seconds, 7200);

  // The run's own failures win over both; the program's value over everything.
  setenv("TENAX_RUN_MTBF", "45s", 1);
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8).seconds, 45);
  EXPECT_EQ(choose_mtbf(0, 8).source, "this run's failures (TENAX_RUN_MTBF)");
  EXPECT_DOUBLE_EQ(choose_mtbf(600, 8).seconds, 600);
  EXPECT_EQ(choose_mtbf(600, 8).source, "the program");

  // The shared tier beside a node-local one covers only the failures the node-local tier could not: the run's figure
  // for those, once the launcher gives it; the run's figure for all failures until then, and for every other tier.
  constexpr FailuresCovered kBeyond = FailuresCovered::BeyondNodeLocal;
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8, kBeyond).seconds, 45) << "no TENAX_RUN_SHARED_MTBF: all failures";
  setenv("TENAX_RUN_SHARED_MTBF", "135s", 1);
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8, kBeyond).seconds, 135);
  EXPECT_EQ(choose_mtbf(0, 8, kBeyond).source,
            "this run's failures beyond the node-local tier (TENAX_RUN_SHARED_MTBF)");
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8).seconds, 45) << "the node-local tier, or the shared tier alone: all failures";
  EXPECT_DOUBLE_EQ(choose_mtbf(600, 8, kBeyond).seconds, 600) << "the program's value still wins";
  unsetenv("TENAX_RUN_MTBF");
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8, kBeyond).seconds, 135);
  EXPECT_DOUBLE_EQ(choose_mtbf(0, 8).seconds, 7200) << "TENAX_RUN_SHARED_MTBF is only the shared tier's";
  unsetenv("TENAX_RUN_SHARED_MTBF");
  unsetenv("TENAX_MTBF");
  unsetenv("TENAX_NODE_MTBF");
}

// A shared save's cost: its call and the progress() calls while it was in flight, known at its commit, with the
// number of those calls (the steps it was in flight).
TEST(SaveCost, ASharedSaveCostsItsCallAndThePollsUntilItsCommit) {
  SharedSaveCost meter;
  EXPECT_FALSE(meter.polled(0.5, false, false)) << "nothing measured before the first save";
  EXPECT_FALSE(meter.before_save());
  meter.saved(0.010);
  EXPECT_FALSE(meter.polled(0.002, true, true)) << "still in flight";
  EXPECT_FALSE(meter.polled(0.003, true, true));
  const std::optional<SaveMeasure> measure = meter.polled(0.004, true, false);
  ASSERT_TRUE(measure);
  EXPECT_DOUBLE_EQ(measure->cost_s, 0.019) << "the call and the three polls that carried it";
  EXPECT_EQ(measure->steps_to_commit, 3) << "known committed at the third step's poll";
  EXPECT_FALSE(meter.polled(0.1, false, false)) << "known once";
  EXPECT_FALSE(meter.before_save()) << "nothing left to measure at the next save";

  // A save done within its call (nothing in flight afterwards): the call alone, at the next poll, in no step.
  meter.saved(0.030);
  const std::optional<SaveMeasure> at_once = meter.polled(0.2, false, false);
  ASSERT_TRUE(at_once);
  EXPECT_DOUBLE_EQ(at_once->cost_s, 0.030) << "a poll with nothing in flight carries nothing";
  EXPECT_EQ(at_once->steps_to_commit, 0);
}

// An interval shorter than a write and commit: the next save comes while the previous one is in flight. Its measure
// so far decides then (it needed more steps than it had), so that the interval still adapts; the new save is measured
// from its own call.
TEST(SaveCost, ASharedSaveStillInFlightAtTheNextSaveCountsItsCostSoFar) {
  SharedSaveCost meter;
  meter.saved(0.010);
  EXPECT_FALSE(meter.polled(0.002, true, true));
  EXPECT_FALSE(meter.polled(0.003, true, true));
  const std::optional<SaveMeasure> so_far = meter.before_save();
  ASSERT_TRUE(so_far);
  EXPECT_DOUBLE_EQ(so_far->cost_s, 0.015);
  EXPECT_EQ(so_far->steps_to_commit, 3) << "two steps in flight and still not committed: at least three";
  meter.saved(0.040);  // blocked by what was left of the previous save: counted as this one's
  const std::optional<SaveMeasure> next = meter.polled(0.001, true, false);
  ASSERT_TRUE(next);
  EXPECT_DOUBLE_EQ(next->cost_s, 0.041) << "the new save's call and its own poll, not the previous save's polls";
  EXPECT_EQ(next->steps_to_commit, 1);
}

TEST(SaveCost, AFailedSharedSaveIsNoMeasure) {
  SharedSaveCost meter;
  meter.saved(0.010);
  EXPECT_FALSE(meter.polled(0.002, true, true));
  meter.failed();
  EXPECT_FALSE(meter.polled(0.003, true, false));
  EXPECT_FALSE(meter.before_save());
  meter.saved(0.020);
  const std::optional<SaveMeasure> next = meter.polled(0.001, true, false);
  ASSERT_TRUE(next) << "the next save is measured again";
  EXPECT_DOUBLE_EQ(next->cost_s, 0.021);
  EXPECT_EQ(next->steps_to_commit, 1);
}

// A node-local save's cost: its call and the node-local tier's polls up to the next save, known at that save. No
// steps to commit: that floor is the shared tier's.
TEST(SaveCost, ANodeLocalSaveCostsItsCallAndThePollsUpToTheNextSave) {
  LocalSaveCost meter;
  meter.polled(0.5);  // before any save: nobody's
  EXPECT_FALSE(meter.saved(0.010)) << "the first save: nothing to report yet";
  meter.polled(0.002);
  meter.polled(0.003);
  const std::optional<SaveMeasure> measure = meter.saved(0.020);
  ASSERT_TRUE(measure);
  EXPECT_DOUBLE_EQ(measure->cost_s, 0.015) << "the first save's call and the two polls after it, not the one before";
  EXPECT_EQ(measure->steps_to_commit, 0);
  EXPECT_DOUBLE_EQ(meter.saved(0.007).value_or(SaveMeasure{.cost_s = -1}).cost_s, 0.020)
      << "no polls in between: the call alone";
}

TEST(CheckpointInterval, NeverShorterThanTheStepsASaveTakesToCommit) {
  // C = 2 ms, M = 60 s: Daly 0.4882 s, 8 steps of 60 ms.
  EXPECT_EQ(automatic_interval_steps(0.002, 60, 0.06, 100000, 0), 8);
  EXPECT_EQ(automatic_interval_steps(0.002, 60, 0.06, 100000, 5), 8) << "a write shorter than the optimum: no change";
  EXPECT_EQ(automatic_interval_steps(0.002, 60, 0.06, 100000, 20), 20);
  EXPECT_EQ(automatic_interval_steps(0.002, 60, 0.06, 15, 20), 15) << "at most the run";
  EXPECT_EQ(automatic_interval_steps(0.002, 60, 0.0, 100, 20), 100)
      << "steps of no measured time: as rarely as allowed";
}

// The closed loop on a slow shared tier: a write takes 20 steps to commit, a save's call costs 2 ms, or blocks for
// what is left of the previous write when one is still in flight after the one interval of grace. With the steps to
// commit as the interval's floor, the choice settles at 20 steps and no save blocks; without it (the floor dropped:
// the same loop choosing Daly's optimum alone) the interval swings between a few steps and tens, and saves block.
struct SlowTierRun {
  std::vector<int> intervals;  // every choice, in order
  double blocked_s = 0;        // save calls' time beyond their own 2 ms
  int saves = 0;
};

SlowTierRun run_slow_tier(bool floor_at_commit) {
  constexpr int kWriteSteps = 20, kSteps = 4000;
  constexpr double kStepS = 0.06, kCallS = 0.002, kMtbfS = 60;
  SlowTierRun run;
  SharedSaveCost meter;
  int every = 50, last_saved = 0, write_left = 0;  // write_left: steps until the write in flight commits
  auto choose = [&](const SaveMeasure& m) {
    every = automatic_interval_steps(m.cost_s, kMtbfS, kStepS, kSteps, floor_at_commit ? m.steps_to_commit : 0);
    run.intervals.push_back(every);
  };
  for (int step = 1; step <= kSteps; ++step) {
    if (automatic_save_now(step - last_saved, every, write_left > 0)) {
      if (const std::optional<SaveMeasure> m = meter.before_save()) choose(*m);
      const double blocked = write_left * kStepS;  // save() finishes the previous write first
      run.blocked_s += blocked;
      meter.saved(kCallS + blocked);
      write_left = kWriteSteps;
      last_saved = step;
      ++run.saves;
    }
    const bool before = write_left > 0;
    if (write_left > 0) --write_left;
    if (const std::optional<SaveMeasure> m = meter.polled(0, before, write_left > 0)) choose(*m);
  }
  return run;
}

TEST(CheckpointInterval, OnASlowTierTheIntervalSettlesAtTheWritesLengthAndNoSaveBlocks) {
  const SlowTierRun run = run_slow_tier(true);
  ASSERT_GT(run.intervals.size(), 100u);
  for (std::size_t i = 1; i < run.intervals.size(); ++i)
    EXPECT_EQ(run.intervals[i], 20) << "choice " << i << " after the first";
  EXPECT_EQ(run.blocked_s, 0) << "every save found the previous one committed";

  // The loop without the floor, to show what this test tells apart: saves block, and the interval swings.
  const SlowTierRun unfloored = run_slow_tier(false);
  EXPECT_GT(unfloored.blocked_s, 10.0) << "without the floor saves block on the previous write";
  const auto [shortest, longest] = std::minmax_element(unfloored.intervals.begin(), unfloored.intervals.end());
  EXPECT_LT(*shortest, 20);
  EXPECT_GT(*longest, 40);
}

TEST(CheckpointInterval, TheCommandLineTakesStepsOrAuto) {
  CheckpointPolicy policy;
  policy.every = 7;
  CheckpointPolicy automatic = CheckpointPolicy::parse_every("auto", policy);
  EXPECT_TRUE(automatic.automatic);
  EXPECT_EQ(automatic.every, 7) << "the interval until the first save";
  CheckpointPolicy fixed = CheckpointPolicy::parse_every("25", automatic);
  EXPECT_FALSE(fixed.automatic);
  EXPECT_EQ(fixed.every, 25);
  EXPECT_EQ(CheckpointPolicy::parse_every("0", policy).every, 0);
  for (const char* bad : {"", "-1", "ten", "10s", "Auto", "1e3"})
    EXPECT_THROW(CheckpointPolicy::parse_every(bad, policy), UsageError) << bad;
}

// The SPANK plugin's --tenax-ckpt-every / --tenax-ckpt-local-every arrive as TENAX_CKPT_EVERY / TENAX_CKPT_LOCAL_EVERY:
// the default of the program's own options, which a value on the program's command line still overrides.
TEST(CheckpointInterval, TheEnvironmentGivesTheProgramsDefaultInterval) {
  unsetenv("TENAX_CKPT_EVERY");
  unsetenv("TENAX_CKPT_LOCAL_EVERY");
  EXPECT_EQ(CheckpointPolicy::every_default("50"), "50");
  EXPECT_EQ(CheckpointPolicy::local_every_default("0"), "0");
  setenv("TENAX_CKPT_EVERY", "auto", 1);
  setenv("TENAX_CKPT_LOCAL_EVERY", "7", 1);
  EXPECT_EQ(CheckpointPolicy::every_default("50"), "auto");
  EXPECT_EQ(CheckpointPolicy::local_every_default("0"), "7");
  EXPECT_TRUE(CheckpointPolicy::parse_every(CheckpointPolicy::every_default("50"), {}).automatic);
  setenv("TENAX_CKPT_EVERY", "", 1);  // set but empty: the program's own
  EXPECT_EQ(CheckpointPolicy::every_default("50"), "50");
  setenv("TENAX_CKPT_EVERY", "10s", 1);
  EXPECT_EQ(CheckpointPolicy::parse_every("25", {}).every, 25) << "a command-line value wins over a bad variable";
  try {
    CheckpointPolicy::parse_every(CheckpointPolicy::every_default("50"), {});
    ADD_FAILURE() << "TENAX_CKPT_EVERY=10s accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("TENAX_CKPT_EVERY (the default of --checkpoint-every) '10s'"),
              std::string::npos)
        << e.what();
  }
  unsetenv("TENAX_CKPT_EVERY");
  unsetenv("TENAX_CKPT_LOCAL_EVERY");
}

TEST(CheckpointInterval, TheNodeLocalIntervalTakesStepsOrAuto) {
  CheckpointPolicy policy;
  CheckpointPolicy automatic = CheckpointPolicy::parse_local_every("auto", policy);
  EXPECT_TRUE(automatic.local_automatic);
  EXPECT_FALSE(automatic.automatic) << "the shared tier's interval is its own";
  CheckpointPolicy fixed = CheckpointPolicy::parse_local_every("5", automatic);
  EXPECT_FALSE(fixed.local_automatic);
  EXPECT_EQ(fixed.local_every, 5);
  for (const char* bad : {"", "-1", "five", "5s"}) {
    try {
      CheckpointPolicy::parse_local_every(bad, policy);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--checkpoint-local-every"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tenax
