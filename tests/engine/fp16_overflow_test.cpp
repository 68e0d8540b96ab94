// fp16 with dynamic loss scaling: an overflow injected on ONE rank makes EVERY rank skip that step (parameters
// untouched), the scale backs off as the hysteresis says, and training goes on and keeps learning.
#include <gtest/gtest.h>

#include <vector>

#include "training_test_util.hpp"

namespace tenax::test {
namespace {

examples::TrainConfig fp16_config(int tp, int pp, int dp) {
  examples::TrainConfig c = small_config(tp, pp, dp);
  c.precision = PrecisionPolicy::parse("fp16");
  return c;
}

// Every rank's skip decisions, gathered: they must be identical.
void expect_all_ranks_agree(const RunResult& r) {
  std::vector<int> mine;
  for (bool s : r.skipped)
    mine.push_back(s ? 1 : 0);
  std::vector<int> all(mine.size() * static_cast<std::size_t>(world().size()));
  world().all_gather(mine.data(), all.data(), mine.size(), DType::I32);
  for (int rank = 0; rank < world().size(); ++rank)
    for (std::size_t s = 0; s < mine.size(); ++s)
      EXPECT_EQ(all[static_cast<std::size_t>(rank) * mine.size() + s], all[s])
          << "rank " << rank << " decided differently at step " << s + 1;
}

TEST(Fp16LossScaling, InjectedOverflowIsSkippedByEveryRankAndTheScaleBacksOff) {
  for (auto [tp, pp, dp, zero1] : std::vector<std::tuple<int, int, int, bool>>{
           {2, 2, 1, false}, {1, 1, 4, true}, {1, 2, 2, false}, {2, 1, 2, true}}) {
    SCOPED_TRACE("tp " + std::to_string(tp) + " pp " + std::to_string(pp) + " dp " + std::to_string(dp));
    examples::TrainConfig c = fp16_config(tp, pp, dp);
    c.data_parallel.zero1 = zero1;
    c.loss_scaler.hysteresis = 1;
    c.inject_overflow_at = {4};
    const RunResult r = train(world(), c, 12);
    expect_all_ranks_agree(r);
    for (std::size_t s = 0; s < r.skipped.size(); ++s)
      EXPECT_EQ(r.skipped[s], s == 3) << "step " << s + 1;
    EXPECT_EQ(r.scales[3], 65536.0f);
    EXPECT_EQ(r.scales[4], 32768.0f) << "the scale backs off by half after the overflow";
    EXPECT_EQ(r.scales.back(), 32768.0f);
    EXPECT_LT(r.losses.back(), r.losses.front() - 0.3) << "training continues after the skipped step";

    // The skipped step changed nothing: the same run without the injection is exactly one update ahead of it, so
    // the run with the overflow at step 4 equals, after step 4, the clean run after 3 steps (same data excepted).
    // Checked through the parameters: 4 steps with the overflow at 4 == 3 clean steps.
    examples::TrainConfig clean = c;
    clean.inject_overflow_at.clear();
    examples::TrainConfig overflowed = c;
    overflowed.inject_overflow_at = {4};
    EXPECT_EQ(train(world(), overflowed, 4).checksum, train(world(), clean, 3).checksum);
  }
}

TEST(Fp16LossScaling, HysteresisTwoSkipsTwiceBeforeBackingOff) {
  examples::TrainConfig c = fp16_config(1, 2, 2);
  c.loss_scaler.hysteresis = 2;
  c.inject_overflow_at = {2, 3};
  const RunResult r = train(world(), c, 6);
  expect_all_ranks_agree(r);
  EXPECT_FALSE(r.skipped[0]);
  EXPECT_TRUE(r.skipped[1]);
  EXPECT_TRUE(r.skipped[2]);
  EXPECT_FALSE(r.skipped[3]);
  EXPECT_EQ(r.scales[2], 65536.0f) << "one overflow within the hysteresis keeps the scale";
  EXPECT_EQ(r.scales[3], 32768.0f) << "the second one backs off";
}

TEST(Fp16LossScaling, Fp16TrainsLikeFp32) {
  const RunResult fp32 = train(world(), small_config(2, 2, 1), 20);
  const RunResult fp16 = train(world(), fp16_config(2, 2, 1), 20);
  for (bool s : fp16.skipped)
    EXPECT_FALSE(s) << "no real overflow is expected in this small model";
  EXPECT_NEAR(fp16.losses.back(), fp32.losses.back(), 0.05 * fp32.losses.back());
}

}  // namespace
}  // namespace tenax::test
