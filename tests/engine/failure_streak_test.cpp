// The engine's count of checkpoint saves that failed in a row (engine/failure_streak.hpp).
#include "engine/failure_streak.hpp"

#include <gtest/gtest.h>

namespace tenax {
namespace {

TEST(FailureStreak, CountsFailuresUntilACommitLearntOfAfterTheLastOne) {
  FailureStreak streak;
  streak.committed(2, 2);
  EXPECT_EQ(streak.failed(8), 1);
  streak.committed(2, 9);  // nothing new
  EXPECT_EQ(streak.count(), 1);
  streak.committed(8, 10);  // the checkpoint taken when the failure was learnt of
  EXPECT_EQ(streak.count(), 0);
  EXPECT_EQ(streak.failed(12), 1);
  EXPECT_EQ(streak.failed(14), 2);
  streak.committed(16, 18);
  EXPECT_EQ(streak.count(), 0);
}

// A checkpointer learns of the commit of step 4 and of the failed write of step 6 at the same call (the write's
// agreement also settles the commit before it): that commit does not end the streak.
TEST(FailureStreak, ACommitLearntOfWithTheFailureDoesNotEndIt) {
  FailureStreak streak;
  streak.committed(2, 4);
  EXPECT_EQ(streak.failed(8), 1);
  streak.committed(4, 8);
  EXPECT_EQ(streak.count(), 1);
  EXPECT_EQ(streak.failed(10), 2);
  streak.committed(std::nullopt, 11);
  EXPECT_EQ(streak.count(), 2);
}

// A failed commit of step B is learnt of when step C is written (at step L >= C); C's own commit, learnt of later, is
// a success between failures even though C < L.
TEST(FailureStreak, ACommitOfACheckpointOlderThanTheCallThatLearntTheFailureEndsItWhenLearntLater) {
  FailureStreak streak;
  EXPECT_EQ(streak.failed(12), 1);  // commit of step 8 failed, learnt of while step 10 was written
  streak.committed(10, 14);
  EXPECT_EQ(streak.count(), 0);
}

}  // namespace
}  // namespace tenax
