// Aggregation over ranks and straggler detection, on hand-built gathered buffers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metrics/aggregate.hpp"
#include "tenax/error.hpp"

namespace tenax::metrics::detail {
namespace {

StepTimes times(std::int64_t step, double compute, double comm, double other = 0.0) {
  StepTimes t;
  t.step = step;
  t.seconds[index_of(Phase::Compute)] = compute;
  t.seconds[index_of(Phase::Comm)] = comm;
  t.seconds[index_of(Phase::Other)] = other;
  t.total = compute + comm + other;
  return t;
}

// Rank-major gather layout, as all_gather delivers it.
std::vector<double> gathered(const std::vector<std::vector<StepTimes>>& per_rank) {
  std::vector<double> out;
  for (const auto& steps : per_rank)
    pack(steps, out);
  return out;
}

TEST(MetricsAggregate, DescribeOddAndEvenCounts) {
  const std::vector<double> odd = {5, 1, 3};
  const Stat a = describe(odd);
  EXPECT_EQ(a.min, 1);
  EXPECT_EQ(a.max, 5);
  EXPECT_EQ(a.median, 3);
  EXPECT_DOUBLE_EQ(a.mean, 3);
  const std::vector<double> even = {4, 1, 3, 2};
  const Stat b = describe(even);
  EXPECT_DOUBLE_EQ(b.median, 2.5);
  EXPECT_DOUBLE_EQ(b.mean, 2.5);
}

TEST(MetricsAggregate, PerStepStatisticsAndSlowestRank) {
  const auto all = gathered({{times(7, 1.0, 0.5), times(8, 1.0, 0.1)},
                             {times(7, 2.0, 0.0), times(8, 1.0, 0.2)},
                             {times(7, 1.5, 0.1), times(8, 3.0, 0.0)}});
  const auto steps = aggregate(all, 3, 2);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 7);
  EXPECT_EQ(steps[0].ranks, 3);
  EXPECT_DOUBLE_EQ(steps[0].total.min, 1.5);
  EXPECT_DOUBLE_EQ(steps[0].total.median, 1.6);
  EXPECT_DOUBLE_EQ(steps[0].total.max, 2.0);
  EXPECT_EQ(steps[0].slowest_rank, 1);
  EXPECT_DOUBLE_EQ(steps[0].phase[index_of(Phase::Comm)].max, 0.5);
  EXPECT_EQ(steps[1].step, 8);
  EXPECT_EQ(steps[1].slowest_rank, 2);
  // The mean of the phases adds up to the mean step time.
  double sum = 0;
  for (const Stat& p : steps[1].phase)
    sum += p.mean;
  EXPECT_NEAR(sum, steps[1].total.mean, 1e-12);
}

TEST(MetricsAggregate, DifferentStepsOnDifferentRanksAreAUsageError) {
  const auto all = gathered({{times(7, 1, 0)}, {times(8, 1, 0)}});
  try {
    aggregate(all, 2, 1);
    FAIL() << "no error for mismatched steps";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 step 8"), std::string::npos) << e.what();
  }
}

// In synchronous training every rank's step takes as long as the slowest one's: the slow rank shows as less time
// waiting in communication, i.e. more busy time.
TEST(MetricsAggregate, StragglerIsTheRankWithTheMostBusyTime) {
  std::vector<std::vector<StepTimes>> per_rank(4);
  for (int s = 0; s < 5; ++s) {
    per_rank[0].push_back(times(s, 1.0, 0.5));
    per_rank[1].push_back(times(s, 1.0, 0.5));
    per_rank[2].push_back(times(s, 1.5, 0.0));  // the straggler: same total, no waiting
    per_rank[3].push_back(times(s, 1.05, 0.45));
  }
  const std::vector<std::string> hosts = {"n0", "n1", "n2", "n3"};
  const auto found = find_stragglers(gathered(per_rank), 4, 5, hosts, 0.2);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 2);
  EXPECT_EQ(found[0].host, "n2");
  EXPECT_NEAR(found[0].busy_seconds, 1.5, 1e-12);
  EXPECT_NEAR(found[0].median_busy_seconds, 1.025, 1e-12);
  EXPECT_NEAR(found[0].excess, 1.5 / 1.025 - 1, 1e-12);
  // With a threshold above its excess, nobody is named.
  EXPECT_TRUE(find_stragglers(gathered(per_rank), 4, 5, hosts, 0.5).empty());
}

TEST(MetricsAggregate, NoStragglerAmongEqualRanksOrAlone) {
  const std::vector<std::string> hosts = {"a", "b"};
  EXPECT_TRUE(find_stragglers(gathered({{times(0, 1, 0)}, {times(0, 1.1, 0)}}), 2, 1, hosts, 0.2).empty());
  EXPECT_TRUE(find_stragglers(gathered({{times(0, 1, 0)}}), 1, 1, hosts, 0.2).empty());
  // Three times slower, but by 2 us: jitter, not a straggler.
  EXPECT_TRUE(find_stragglers(gathered({{times(0, 1e-6, 0)}, {times(0, 3e-6, 0)}}), 2, 1, hosts, 0.2).empty());
}

}  // namespace
}  // namespace tenax::metrics::detail
