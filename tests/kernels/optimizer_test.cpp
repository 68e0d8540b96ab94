// Fused optimizer steps, gradient unscaling and the sum of squares against float64 computations of the same formulas.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/half.hpp"
#include "tenax/kernels/optimizer.hpp"
#include "tenax/kernels/reduction.hpp"
#include "tenax/kernels/unscale.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::random_floats;
using test::to_double;

constexpr std::size_t kN = 4099;  // not a multiple of any vector width: the tails are exercised too

struct AdamWState {
  std::vector<float> w, m, v, g;
};

AdamWState random_adamw_state(unsigned seed) {
  return {random_floats(kN, -1.0f, 1.0f, seed), random_floats(kN, -0.1f, 0.1f, seed + 1),
          random_floats(kN, 0.0f, 0.01f, seed + 2), random_floats(kN, -0.5f, 0.5f, seed + 3)};
}

TEST(AdamWTest, MatchesFloat64StepAtSeveralStepCounts) {
  for (long step : {1L, 2L, 10L, 1000L}) {
    AdamWState s = random_adamw_state(static_cast<unsigned>(step));
    const AdamWParams p{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = step};
    std::vector<double> w(kN), m(kN), v(kN);
    const double bc1 = 1.0 - std::pow(double{p.beta1}, double(step));
    const double bc2 = 1.0 - std::pow(double{p.beta2}, double(step));
    for (std::size_t i = 0; i < kN; ++i) {
      const double g = s.g[i];
      m[i] = double{p.beta1} * s.m[i] + (1.0 - double{p.beta1}) * g;
      v[i] = double{p.beta2} * s.v[i] + (1.0 - double{p.beta2}) * g * g;
      w[i] = s.w[i] * (1.0 - double{p.lr} * p.weight_decay) -
             (double{p.lr} / bc1) * m[i] / (std::sqrt(v[i] / bc2) + double{p.eps});
    }
    cpu::adamw_step(s.w.data(), s.m.data(), s.v.data(), s.g.data(), nullptr, DType::BF16, kN, p);
    // m = b1*m + (1-b1)*g may cancel: its rounding error is relative to the terms (~0.1), not to the result.
    EXPECT_TRUE(all_close(s.m, m, 1e-6, 1e-8)) << "step " << step;
    EXPECT_TRUE(all_close(s.v, v, 1e-6, 1e-12)) << "step " << step;
    // The update itself is ~lr: an absolute error of 1e-6 is ~0.03% of it, well above fp32 rounding of w (~6e-8).
    EXPECT_TRUE(all_close(s.w, w, 1e-6, 2e-7)) << "step " << step;
  }
}

TEST(AdamWTest, WritesTheRoundedCopyOfTheNewWeightsInEveryLowPrecisionType) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    AdamWState fused = random_adamw_state(11);
    AdamWState plain = fused;
    const AdamWParams p{.step = 3};
    std::vector<std::uint32_t> lowp(kN, 0xDEADBEEFu);  // wide enough for F32; 16-bit types use the first half
    cpu::adamw_step(fused.w.data(), fused.m.data(), fused.v.data(), fused.g.data(), lowp.data(), t, kN, p);
    cpu::adamw_step(plain.w.data(), plain.m.data(), plain.v.data(), plain.g.data(), nullptr, t, kN, p);
    ASSERT_EQ(fused.w, plain.w) << "the low-precision copy must not change the fp32 update";
    std::vector<float> expected_copy(kN);
    std::vector<float> copy(kN);
    for (std::size_t i = 0; i < kN; ++i) {
      if (t == DType::F32) {
        copy[i] = bits_float(lowp[i]);
        expected_copy[i] = fused.w[i];
      } else {
        const auto* bits = reinterpret_cast<const std::uint16_t*>(lowp.data());
        copy[i] = t == DType::BF16 ? bf16_bits_to_float(bits[i]) : f16_bits_to_float(bits[i]);
        expected_copy[i] = t == DType::BF16 ? bf16_bits_to_float(float_to_bf16_bits(fused.w[i]))
                                            : f16_bits_to_float(float_to_f16_bits(fused.w[i]));
      }
    }
    EXPECT_EQ(copy, expected_copy) << dtype_name(t);
  }
}

TEST(AdamWTest, RejectsBadParameters) {
  float w = 0, m = 0, v = 0, g = 0;
  std::uint16_t out = 0;
  EXPECT_THROW(cpu::adamw_step(&w, &m, &v, &g, nullptr, DType::F32, 1, AdamWParams{.step = 0}), UsageError);
  EXPECT_THROW(cpu::adamw_step(&w, &m, &v, &g, nullptr, DType::F32, 1, AdamWParams{.beta1 = 1.0f}), UsageError);
  EXPECT_THROW(cpu::adamw_step(&w, &m, &v, &g, nullptr, DType::F32, 1, AdamWParams{.eps = 0.0f}), UsageError);
  EXPECT_THROW(cpu::adamw_step(&w, &m, &v, &g, &out, DType::I32, 1, AdamWParams{}), UsageError);
  EXPECT_THROW(cpu::adamw_step(&w, nullptr, &v, &g, nullptr, DType::F32, 1, AdamWParams{}), UsageError);
}

void expect_sgd_matches_float64(const SgdParams& p) {
  std::vector<float> w = random_floats(kN, -1.0f, 1.0f, 21);
  std::vector<float> vel = random_floats(kN, -0.1f, 0.1f, 22);
  const std::vector<float> g = random_floats(kN, -0.5f, 0.5f, 23);
  std::vector<double> w64(kN), vel64(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    const double gi = g[i] + double{p.weight_decay} * w[i];
    vel64[i] = double{p.momentum} * vel[i] + gi;
    const double d = p.nesterov ? gi + double{p.momentum} * vel64[i] : vel64[i];
    w64[i] = w[i] - double{p.lr} * d;
  }
  std::vector<std::uint16_t> lowp(kN);
  cpu::sgd_momentum_step(w.data(), vel.data(), g.data(), lowp.data(), DType::BF16, kN, p);
  EXPECT_TRUE(all_close(vel, vel64, 1e-6, 1e-8));
  EXPECT_TRUE(all_close(w, w64, 1e-6, 1e-8));
  for (std::size_t i = 0; i < kN; ++i)
    ASSERT_EQ(lowp[i], float_to_bf16_bits(w[i])) << "element " << i;
}

TEST(SgdTest, MomentumMatchesFloat64Step) {
  expect_sgd_matches_float64({.lr = 0.05f, .momentum = 0.9f});
}
TEST(SgdTest, NesterovWithWeightDecayMatchesFloat64Step) {
  expect_sgd_matches_float64({.lr = 0.05f, .momentum = 0.8f, .weight_decay = 0.01f, .nesterov = true});
}

TEST(SgdTest, ZeroMomentumNeedsNoVelocity) {
  std::vector<float> w = random_floats(kN, -1.0f, 1.0f, 31);
  const std::vector<float> g = random_floats(kN, -1.0f, 1.0f, 32);
  std::vector<double> expected(kN);
  for (std::size_t i = 0; i < kN; ++i)
    expected[i] = w[i] - 0.1 * (g[i] + 0.5 * double{w[i]});
  cpu::sgd_momentum_step(w.data(), nullptr, g.data(), nullptr, DType::F32, kN,
                         {.lr = 0.1f, .momentum = 0.0f, .weight_decay = 0.5f});
  EXPECT_TRUE(all_close(w, expected, 1e-6, 1e-7));
  float one = 1.0f;
  EXPECT_THROW(cpu::sgd_momentum_step(&one, nullptr, &one, nullptr, DType::F32, 1, {.momentum = 0.9f}), UsageError);
  EXPECT_THROW(cpu::sgd_momentum_step(&one, &one, &one, nullptr, DType::F32, 1, {.momentum = 0.0f, .nesterov = true}),
               UsageError);
}

TEST(UnscaleTest, ScalesEveryElementAndLeavesTheFlagAloneWhenFinite) {
  std::vector<float> g = random_floats(kN, -1e4f, 1e4f, 41);
  const float inv_scale = 1.0f / 65536.0f;
  std::vector<double> expected(kN);
  for (std::size_t i = 0; i < kN; ++i)
    expected[i] = double{g[i]} * inv_scale;  // exact: a power of two
  float flag = 0.0f;
  cpu::unscale_and_check(g.data(), kN, inv_scale, &flag);
  EXPECT_TRUE(all_close(g, expected, 0.0, 0.0));
  EXPECT_EQ(flag, 0.0f);
  flag = 1.0f;  // set by an earlier buffer of the same step: must stay set
  cpu::unscale_and_check(g.data(), kN, 1.0f, &flag);
  EXPECT_EQ(flag, 1.0f);
}

// A factor of one is the check alone: the gradients are only read (here from read-only pages, where a write back would
// fault), and every NaN or infinity is still found.
TEST(UnscaleTest, AFactorOfOneOnlyReadsAndStillFindsNonFiniteValues) {
  const std::size_t bytes = kN * sizeof(float);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  auto* g = static_cast<float*>(memory);
  const std::vector<float> values = random_floats(kN, -1e4f, 1e4f, 43);
  std::copy(values.begin(), values.end(), g);
  ASSERT_EQ(mprotect(memory, bytes, PROT_READ), 0);
  float flag = 0.0f;
  cpu::unscale_and_check(g, kN, 1.0f, &flag);
  EXPECT_EQ(flag, 0.0f);
  for (std::size_t where : {std::size_t{0}, kN / 2, kN - 1})
    for (float special : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      ASSERT_EQ(mprotect(memory, bytes, PROT_READ | PROT_WRITE), 0);
      std::copy(values.begin(), values.end(), g);
      g[where] = special;
      ASSERT_EQ(mprotect(memory, bytes, PROT_READ), 0);
      flag = 0.0f;
      cpu::unscale_and_check(g, kN, 1.0f, &flag);
      EXPECT_EQ(flag, 1.0f) << "value " << special << " at " << where;
    }
  munmap(memory, bytes);
}

TEST(UnscaleTest, FlagsNaNInfAndOverflowAfterScaling) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (std::size_t where : {std::size_t{0}, kN / 2, kN - 1}) {
    for (float special : specials) {
      std::vector<float> g = random_floats(kN, -1.0f, 1.0f, 42);
      g[where] = special;
      const std::vector<float> before = g;
      float flag = 0.0f;
      cpu::unscale_and_check(g.data(), kN, 0.5f, &flag);
      EXPECT_EQ(flag, 1.0f) << "value " << special << " at " << where;
      // The pass still scales every finite element (the caller decides whether to skip the step).
      for (std::size_t i = 0; i < kN; ++i) {
        if (i != where) {
          ASSERT_EQ(g[i], before[i] * 0.5f) << "element " << i;
        }
      }
    }
  }
  std::vector<float> g(kN, 1.0f);
  g[7] = FLT_MAX;  // finite, but not once multiplied by 4
  float flag = 0.0f;
  cpu::unscale_and_check(g.data(), kN, 4.0f, &flag);
  EXPECT_EQ(flag, 1.0f);
}

TEST(SumSquaresTest, MatchesFloat64AndIsDeterministic) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{5}, std::size_t{1001}, kN}) {
    const std::vector<float> x = random_floats(n, -3.0f, 3.0f, 51);
    long double expected = 0;
    for (float v : x)
      expected += static_cast<long double>(v) * v;
    const double got = cpu::sum_squares(x.data(), n);
    EXPECT_NEAR(got, static_cast<double>(expected), 1e-13 * static_cast<double>(expected)) << "n = " << n;
    EXPECT_EQ(got, cpu::sum_squares(x.data(), n)) << "n = " << n;
  }
}

}  // namespace
}  // namespace tenax::kernels
