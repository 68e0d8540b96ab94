// The end-of-run summary: figures, advice naming the dominant phase, goodput.
#include <gtest/gtest.h>

#include "metrics/outputs.hpp"

namespace tenax::metrics::detail {
namespace {

RunTotals totals_with(double data_wait, double compute, double comm, double other) {
  RunTotals t;
  t.steps = 100;
  t.phase_seconds[index_of(Phase::DataWait)] = data_wait;
  t.phase_seconds[index_of(Phase::Compute)] = compute;
  t.phase_seconds[index_of(Phase::Comm)] = comm;
  t.phase_seconds[index_of(Phase::Other)] = other;
  t.step_seconds = data_wait + compute + comm + other;
  t.windows = 4;
  return t;
}

const std::vector<std::string> kHosts = {"n0", "n1"};

TEST(MetricsSummary, DataBoundRunGetsLoaderAdviceFirst) {
  const RunTotals t = totals_with(6, 3, 2, 0);
  const Summary s = summarize(t, std::nullopt, RunIdentity{1, 2, "host"}, kHosts);
  EXPECT_EQ(s.steps, 100);
  EXPECT_DOUBLE_EQ(s.mean_step_seconds, 0.11);
  EXPECT_NEAR(s.starvation, 6.0 / 11, 1e-12);
  EXPECT_NEAR(s.step_efficiency, 3.0 / 11, 1e-12);
  EXPECT_NEAR(s.exposed_comm, 2.0 / 11, 1e-12);
  ASSERT_GE(s.advice.size(), 2u);
  EXPECT_EQ(s.advice[0].rfind("data-bound: raise loader workers", 0), 0u) << s.advice[0];
  EXPECT_EQ(s.advice[1].rfind("communication-bound", 0), 0u) << s.advice[1];
  EXPECT_NE(s.table.find("starvation"), std::string::npos);
  EXPECT_NE(s.table.find("54.5%"), std::string::npos) << s.table;
  EXPECT_NE(s.table.find("goodput"), std::string::npos);
  double sum = 0;
  for (double f : s.phase_fraction)
    sum += f;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(MetricsSummary, ComputeBoundRunGetsNoBottleneckAdvice) {
  const Summary s = summarize(totals_with(0.1, 9.5, 0.2, 0.2), std::nullopt, RunIdentity{1, 2, "host"}, kHosts);
  ASSERT_EQ(s.advice.size(), 1u);
  EXPECT_EQ(s.advice[0].rfind("compute-bound", 0), 0u) << s.advice[0];
}

TEST(MetricsSummary, StragglersAndGoodputAppear) {
  RunTotals t = totals_with(0, 10, 0, 0);
  t.straggler_windows[1] = 3;
  const Goodput g{2, 90, 5, 100, 0.9};
  const Summary s = summarize(t, g, RunIdentity{3, 2, "device"}, kHosts);
  ASSERT_TRUE(s.goodput);
  EXPECT_DOUBLE_EQ(*s.goodput, 0.9);
  EXPECT_EQ(s.attempts, 3);
  EXPECT_NE(s.table.find("90.0% over 3 attempts"), std::string::npos) << s.table;
  bool named = false;
  for (const auto& a : s.advice)
    named |= a.find("rank 1 (n1)") != std::string::npos && a.find("3 of 4") != std::string::npos;
  EXPECT_TRUE(named);
  const std::string json = summary_json(s, t, g, RunIdentity{3, 2, "device"});
  EXPECT_NE(json.find("\"goodput\":{\"goodput\":0.9"), std::string::npos) << json;
  EXPECT_NE(json.find("\"stragglers\":{\"1\":3}"), std::string::npos) << json;
}

}  // namespace
}  // namespace tenax::metrics::detail
