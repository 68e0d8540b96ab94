#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "tenax/error.hpp"
#include "tenax/loss_scaler.hpp"
#include "tenax/precision.hpp"

namespace tenax {
namespace {

TEST(DynamicLossScaler, StartsAtTwoToTheSixteenAndGrowsAfterTheWindow) {
  LossScalerConfig c;
  c.growth_interval = 3;
  DynamicLossScaler s(c);
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.clean_steps_in_a_row(), 0);
}

TEST(DynamicLossScaler, HysteresisDelaysTheBackOff) {
  LossScalerConfig c;
  c.hysteresis = 2;
  DynamicLossScaler s(c);
  EXPECT_TRUE(s.update(true));  // first overflow: skipped, scale kept
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_TRUE(s.update(true));  // second: backs off
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_TRUE(s.update(true));  // hysteresis exhausted: every further overflow backs off until a growth resets it
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_EQ(s.skipped_steps(), 3);
}

TEST(DynamicLossScaler, CleanStepsBetweenOverflowsDoNotRestoreHysteresisBeforeGrowth) {
  LossScalerConfig c;
  c.hysteresis = 2;
  c.growth_interval = 2;
  DynamicLossScaler s(c);
  s.update(true);
  EXPECT_EQ(s.hysteresis_left(), 1);
  s.update(false);
  s.update(false);  // growth: hysteresis restored
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.hysteresis_left(), 2);
  s.update(true);
  EXPECT_EQ(s.scale(), 131072.0f);
}

TEST(DynamicLossScaler, NeverGoesBelowTheMinimum) {
  LossScalerConfig c;
  c.initial_scale = 4;
  c.min_scale = 2;
  c.hysteresis = 1;
  DynamicLossScaler s(c);
  s.update(true);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 2.0f);
}

TEST(DynamicLossScaler, RestoresItsState) {
  DynamicLossScaler a;
  a.update(true);
  a.update(false);
  DynamicLossScaler b;
  b.restore(a.state());
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.hysteresis_left(), a.hysteresis_left());
  EXPECT_EQ(b.skipped_steps(), 1);
  EXPECT_THROW(b.restore({-1.0f, 0, 1, 0}), UsageError);
}

TEST(DynamicLossScaler, RejectsBadConfiguration) {
  LossScalerConfig c;
  c.backoff_factor = 1.5f;
  EXPECT_THROW(DynamicLossScaler{c}, UsageError);
  c = {};
  c.growth_factor = 1.0f;
  EXPECT_THROW(DynamicLossScaler{c}, UsageError);
  c = {};
  c.hysteresis = 0;
  EXPECT_THROW(DynamicLossScaler{c}, UsageError);
  c = {};
  c.growth_interval = 0;
  EXPECT_THROW(DynamicLossScaler{c}, UsageError);
}

TEST(PrecisionPolicy, ParsesNamesAndMapsDtypes) {
  EXPECT_EQ(PrecisionPolicy::parse("bf16").param_dtype(), DType::BF16);
  EXPECT_EQ(PrecisionPolicy::parse("fp16").param_dtype(), DType::F16);
  EXPECT_EQ(PrecisionPolicy::parse("fp32").param_dtype(), DType::F32);
  EXPECT_TRUE(PrecisionPolicy::parse("fp16").uses_loss_scaling());
  EXPECT_FALSE(PrecisionPolicy::parse("bf16").uses_loss_scaling());
  EXPECT_THROW(PrecisionPolicy::parse("fp8"), UsageError);
}

TEST(PrecisionPolicy, RoundsToTheSixteenBitFormats) {
  float v[3] = {1.0f + 1.0f / 512, 70000.0f, 1.0f / 3};
  std::uint16_t scratch[3];
  round_to_dtype(v, 3, DType::F16, scratch);
  EXPECT_EQ(v[0], 1.0f + 1.0f / 512);  // representable in fp16 (10 mantissa bits)
  EXPECT_TRUE(std::isinf(v[1]));       // beyond fp16's range: the overflow the loss scaler must catch
  EXPECT_NEAR(v[2], 1.0f / 3, 1e-3);
  float w[1] = {1.0f + 1.0f / 512};
  round_to_dtype(w, 1, DType::BF16, scratch);
  EXPECT_EQ(w[0], 1.0f);  // bf16 keeps 7 mantissa bits: the tie rounds to even
}

}  // namespace
}  // namespace tenax
