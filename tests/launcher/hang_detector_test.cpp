#include <gtest/gtest.h>

#include "hang_detector.hpp"

namespace tenax::launch {
namespace {

Heartbeat beat(int rank, std::uint64_t n, std::int64_t step, std::uint64_t seq, std::int64_t resumed = 0) {
  Heartbeat h;
  h.rank = rank;
  h.node = "n" + std::to_string(rank + 1);
  h.beat = n;
  h.step = step;
  h.seq = seq;
  h.resumed_step = resumed;
  return h;
}

HangSettings fixed(double timeout) {
  HangSettings s;
  s.fixed_timeout_s = timeout;
  s.startup_timeout_s = 100;
  return s;
}

TEST(HangDetector, ASilentRankIsNamedWithItsNode) {
  HangDetector d(fixed(2.0), 2, 0.0);
  d.observe({beat(0, 1, 0, 0), beat(1, 1, 0, 0)}, 0.1);
  d.observe({beat(0, 2, 1, 2), beat(1, 2, 1, 2)}, 0.5);
  // Rank 1 stops writing; rank 0 keeps beating (blocked in a collective, its heartbeat thread alive).
  for (int i = 0; i < 20; ++i)
    d.observe({beat(0, 3 + i, 1, 3), beat(1, 2, 1, 2)}, 0.6 + 0.1 * i);
  EXPECT_FALSE(d.check(2.4).has_value());
  auto verdict = d.check(2.6);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->kind, HangVerdict::Kind::Silent);
  EXPECT_EQ(verdict->ranks, std::vector<int>{1});
  EXPECT_EQ(verdict->nodes, std::vector<std::string>{"n2"});
  EXPECT_NE(verdict->description.find("rank 1 on n2 silent"), std::string::npos) << verdict->description;
}

// --hang-timeout 0: neither a silent rank nor a stall is a hang once the attempt runs; the startup timeout still
// bounds the time to the first heartbeat.
TEST(HangDetector, DisabledDetectionGivesNoVerdictOnceTheRanksRun) {
  HangSettings off = fixed(0);
  off.enabled = false;
  HangDetector d(off, 2, 0.0);
  d.observe({beat(0, 1, 0, 0), beat(1, 1, 0, 0)}, 0.1);
  d.observe({beat(0, 2, 1, 2), beat(1, 2, 1, 2)}, 0.5);
  d.observe({beat(0, 3, 1, 3), beat(1, 2, 1, 2)}, 0.6);  // rank 1 falls silent, no step completes any more
  EXPECT_FALSE(d.check(50.0).has_value());
  EXPECT_FALSE(d.check(1e6).has_value());
  EXPECT_EQ(d.timeout_s(), 0.0) << "the ledger's hang_timeout_s: 0 = disabled";

  HangDetector never_started(off, 2, 0.0);
  never_started.observe({beat(0, 1, -1, 0, -1)}, 0.1);
  auto verdict = never_started.check(100.5);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->kind, HangVerdict::Kind::NotStarted);
}

TEST(HangDetector, RanksStuckAtDifferentCollectivesNameTheLowest) {
  HangDetector d(fixed(1.0), 3, 0.0);
  d.observe({beat(0, 1, 4, 10), beat(1, 1, 4, 10), beat(2, 1, 4, 10)}, 0.1);
  d.observe({beat(0, 2, 5, 12), beat(1, 2, 5, 12), beat(2, 2, 5, 11)}, 0.2);
  for (int i = 0; i < 15; ++i) {
    std::uint64_t n = 3 + static_cast<std::uint64_t>(i);
    d.observe({beat(0, n, 5, 12), beat(1, n, 5, 12), beat(2, n, 5, 11)}, 0.3 + 0.1 * i);
  }
  EXPECT_FALSE(d.check(1.1).has_value());
  auto verdict = d.check(1.3);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->kind, HangVerdict::Kind::Stalled);
  EXPECT_EQ(verdict->ranks, std::vector<int>{2});
  EXPECT_NE(verdict->description.find("laggard rank 2 on n3 at collective 11 while others reached 12"),
            std::string::npos)
      << verdict->description;
}

TEST(HangDetector, RanksStuckTogetherHaveNoSingleCulprit) {
  HangDetector d(fixed(1.0), 2, 0.0);
  d.observe({beat(0, 1, 0, 0), beat(1, 1, 0, 0)}, 0.1);
  d.observe({beat(0, 2, 3, 7), beat(1, 2, 3, 7)}, 0.2);
  for (int i = 0; i < 15; ++i) {
    std::uint64_t n = 3 + static_cast<std::uint64_t>(i);
    d.observe({beat(0, n, 3, 7), beat(1, n, 3, 7)}, 0.3 + 0.1 * i);
  }
  auto verdict = d.check(1.5);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_TRUE(verdict->ranks.empty());
  EXPECT_NE(verdict->description.find("all ranks stuck together at step 3"), std::string::npos);
}

TEST(HangDetector, TheDerivedTimeoutFollowsTheSlowestStep) {
  HangSettings s;
  s.min_timeout_s = 5;
  s.factor = 10;
  s.startup_timeout_s = 100;
  HangDetector d(s, 1, 0.0);
  EXPECT_DOUBLE_EQ(d.timeout_s(), 5.0);
  d.observe({beat(0, 1, 0, 0)}, 0.0);
  d.observe({beat(0, 2, 1, 1)}, 1.0);  // first step: no interval yet
  d.observe({beat(0, 3, 2, 2)}, 1.2);
  EXPECT_DOUBLE_EQ(d.timeout_s(), 5.0);
  d.observe({beat(0, 4, 3, 3)}, 2.0);  // a 0.8 s step
  EXPECT_NEAR(d.timeout_s(), 8.0, 1e-9);
  EXPECT_TRUE(d.any_step_completed());
  EXPECT_EQ(d.max_step(), 3);
}

TEST(HangDetector, BeforeTheFirstStepTheStartupTimeoutApplies) {
  HangSettings s = fixed(1.0);
  s.startup_timeout_s = 10;
  HangDetector d(s, 2, 0.0);
  for (int i = 0; i < 50; ++i) {
    std::uint64_t n = 1 + static_cast<std::uint64_t>(i);
    d.observe({beat(0, n, -1, 0, -1), beat(1, n, -1, 0, -1)}, 0.1 * i);  // loading, beating, no step
  }
  EXPECT_FALSE(d.check(5.0).has_value());
  EXPECT_EQ(d.first_step_s(), -1);
  EXPECT_GE(d.first_beat_s(), 0);
}

TEST(HangDetector, ARankThatNeverStartsIsReported) {
  HangSettings s = fixed(1.0);
  s.startup_timeout_s = 3;
  HangDetector d(s, 2, 0.0);
  // Rank 0 beats on; rank 1 never writes a heartbeat.
  for (int i = 0; i < 30; ++i)
    d.observe({beat(0, 1 + static_cast<std::uint64_t>(i), -1, 0, -1)}, 0.1 * i);
  EXPECT_FALSE(d.check(2.95).has_value());
  auto verdict = d.check(3.05);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->kind, HangVerdict::Kind::NotStarted);
  EXPECT_EQ(verdict->ranks, std::vector<int>{1});
}

TEST(HangDetector, RanksThatExitedAreNotSilent) {
  HangDetector d(fixed(1.0), 2, 0.0);
  Heartbeat done = beat(1, 5, 10, 20);
  done.exit_code = 0;
  d.observe({beat(0, 1, 10, 20), done}, 0.1);
  d.observe({beat(0, 2, 10, 20), done}, 0.2);
  auto verdict = d.check(0.9);
  EXPECT_FALSE(verdict.has_value());
}

// Two ranks per node. Heartbeats come from a thread of each rank, so when every rank of one node falls silent while
// the other node's ranks keep beating, the node is what failed (dead, frozen, cut off), before Slurm says so.
TEST(HangDetector, AWholeNodeFallingSilentIsNamedAsTheNode) {
  auto on = [](const std::string& node, Heartbeat h) {
    h.node = node;
    return h;
  };
  HangDetector d(fixed(1.0), 4, 0.0);
  d.observe(
      {on("a", beat(0, 1, 1, 1)), on("a", beat(1, 1, 1, 1)), on("b", beat(2, 1, 1, 1)), on("b", beat(3, 1, 1, 1))},
      0.1);
  for (int i = 0; i < 20; ++i)
    d.observe({on("a", beat(0, 2 + i, 1, 2)), on("a", beat(1, 2 + i, 1, 2)), on("b", beat(2, 1, 1, 1)),
               on("b", beat(3, 1, 1, 1))},
              0.2 + 0.1 * i);
  auto verdict = d.check(2.0);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->kind, HangVerdict::Kind::Silent);
  EXPECT_EQ(verdict->ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(verdict->silent_nodes, std::vector<std::string>{"b"});
  EXPECT_NE(verdict->description.find("every running rank on b is silent"), std::string::npos) << verdict->description;

  // The ranks of a frozen node stop a moment apart: when the first crosses the timeout, the second (quiet for more than
  // half of it) still counts for its node.
  HangDetector staggered(fixed(1.0), 4, 0.0);
  staggered.observe(
      {on("a", beat(0, 1, 1, 1)), on("a", beat(1, 1, 1, 1)), on("b", beat(2, 1, 1, 1)), on("b", beat(3, 1, 1, 1))},
      0.1);
  staggered.observe(
      {on("a", beat(0, 2, 1, 2)), on("a", beat(1, 2, 1, 2)), on("b", beat(2, 2, 1, 2)), on("b", beat(3, 1, 1, 1))},
      0.4);
  for (int i = 0; i < 8; ++i)
    staggered.observe({on("a", beat(0, 3 + i, 1, 2)), on("a", beat(1, 3 + i, 1, 2)), on("b", beat(2, 2, 1, 2)),
                       on("b", beat(3, 1, 1, 1))},
                      0.5 + 0.1 * i);
  verdict = staggered.check(1.15);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->ranks, std::vector<int>{3});
  EXPECT_EQ(verdict->silent_nodes, std::vector<std::string>{"b"});

  // One silent rank of two on a node is that rank's problem, not the node's.
  HangDetector one(fixed(1.0), 4, 0.0);
  one.observe(
      {on("a", beat(0, 1, 1, 1)), on("a", beat(1, 1, 1, 1)), on("b", beat(2, 1, 1, 1)), on("b", beat(3, 1, 1, 1))},
      0.1);
  for (int i = 0; i < 20; ++i)
    one.observe({on("a", beat(0, 2 + i, 1, 2)), on("a", beat(1, 2 + i, 1, 2)), on("b", beat(2, 2 + i, 1, 2)),
                 on("b", beat(3, 1, 1, 1))},
                0.2 + 0.1 * i);
  verdict = one.check(2.0);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->ranks, std::vector<int>{3});
  EXPECT_TRUE(verdict->silent_nodes.empty());

  // Every node silent (the heartbeats' file system, say): no node stands out.
  HangDetector all(fixed(1.0), 4, 0.0);
  all.observe(
      {on("a", beat(0, 1, 1, 1)), on("a", beat(1, 1, 1, 1)), on("b", beat(2, 1, 1, 1)), on("b", beat(3, 1, 1, 1))},
      0.1);
  verdict = all.check(2.0);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->ranks.size(), 4u);
  EXPECT_TRUE(verdict->silent_nodes.empty());
}

}  // namespace
}  // namespace tenax::launch
