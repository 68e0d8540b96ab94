// The engine's count of checkpoint saves that failed in a row (engine/failure_streak.hpp).
#include "engine/failure_streak.hpp"

#include <gtest/gtest.h>

namespace tenax {
namespace {

TEST(FailureStreak, CountsFailuresUntilACheckpointAtOrAfterTheLastOneCommits) {
  FailureStreak streak;
  streak.committed(2);
  EXPECT_EQ(streak.failed(8), 1);
  streak.committed(2);  // nothing new
  EXPECT_EQ(streak.count(), 1);
  streak.committed(8);  // the checkpoint taken when the failure was learnt of
  EXPECT_EQ(streak.count(), 0);
  EXPECT_EQ(streak.failed(12), 1);
  EXPECT_EQ(streak.failed(14), 2);
  streak.committed(16);
  EXPECT_EQ(streak.count(), 0);
}

// A checkpointer learns of the commit of step 4 and of the failed write of step 6 at the same call (the write's
// agreement also settles the commit before it): that commit is older than the failure and does not end the streak.
TEST(FailureStreak, ACommitOfAnOlderCheckpointLearntOfWithTheFailureDoesNotEndIt) {
  FailureStreak streak;
  streak.committed(2);
  EXPECT_EQ(streak.failed(8), 1);
  streak.committed(4);
  EXPECT_EQ(streak.count(), 1);
  EXPECT_EQ(streak.failed(10), 2);
  streak.committed(std::nullopt);
  EXPECT_EQ(streak.count(), 2);
}

}  // namespace
}  // namespace tenax
