// fp16 with dynamic loss scaling under the engine: an overflow injected on ONE rank (by a custom module) makes EVERY
// rank skip that step (parameters untouched), the scale backs off as the hysteresis says, and training goes on.
#include <gtest/gtest.h>

#include <tuple>

#include "engine_test_util.hpp"

namespace tenax::test {
namespace {

EngineConfig fp16_config(const Variant& v) {
  EngineConfig c = small_config(v);
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
  for (const Variant& v : {Variant{2, 2, 1}, Variant{1, 1, 4, true}, Variant{1, 2, 2}, Variant{2, 1, 2, true},
                           Variant{1, 2, 2, false, PipelineKind::Interleaved, 2}}) {
    SCOPED_TRACE(v.name());
    EngineConfig c = fp16_config(v);
    c.loss_scaler.hysteresis = 1;
    Injection at4{{4}};
    const RunResult r = train(world(), c, 12, &at4);
    expect_all_ranks_agree(r);
    for (std::size_t s = 0; s < r.skipped.size(); ++s)
      EXPECT_EQ(r.skipped[s], s == 3) << "step " << s + 1;
    EXPECT_EQ(r.scales[3], 65536.0f);
    EXPECT_EQ(r.scales[4], 32768.0f) << "the scale backs off by half after the overflow";
    EXPECT_EQ(r.scales.back(), 32768.0f);
    EXPECT_LT(r.losses.back(), r.losses.front() - 0.3) << "training continues after the skipped step";
    // The skipped step changed nothing: 4 steps with the overflow at step 4 leave the parameters of 3 clean steps.
    Injection none, again{{4}};
    EXPECT_EQ(train(world(), c, 4, &again).checksum, train(world(), c, 3, &none).checksum);
  }
}

TEST(Fp16LossScaling, HysteresisTwoSkipsTwiceBeforeBackingOff) {
  EngineConfig c = fp16_config({1, 2, 2});
  c.loss_scaler.hysteresis = 2;
  Injection at{{2, 3}};
  const RunResult r = train(world(), c, 6, &at);
  expect_all_ranks_agree(r);
  EXPECT_FALSE(r.skipped[0]);
  EXPECT_TRUE(r.skipped[1]);
  EXPECT_TRUE(r.skipped[2]);
  EXPECT_FALSE(r.skipped[3]);
  EXPECT_EQ(r.scales[2], 65536.0f) << "one overflow within the hysteresis keeps the scale";
  EXPECT_EQ(r.scales[3], 32768.0f) << "the second one backs off";
}

TEST(Fp16LossScaling, Fp16TrainsLikeFp32) {
  const RunResult fp32 = train(world(), small_config({2, 2, 1}), 20);
  const RunResult fp16 = train(world(), fp16_config({2, 2, 1}), 20);
  for (bool s : fp16.skipped)
    EXPECT_FALSE(s) << "no real overflow is expected in this small model";
  EXPECT_NEAR(fp16.losses.back(), fp32.losses.back(), 0.05 * fp32.losses.back());
}

}  // namespace
}  // namespace tenax::test
