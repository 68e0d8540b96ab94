// CPU references of the attention building blocks: the head split/merge layout, the strided-batched product and the
// fused causal softmax (forward and backward) against float64 computations, and their refusals of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "common/causal_softmax_rows.hpp"
#include "common/vector_exp.hpp"
#include "kernel_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/attention.hpp"
#include "tenax/kernels/batched_gemm.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::random_floats;
using test::widen;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The packed QKV layout of attention.hpp, spelled out: head-major, q/k/v of a head in 3*D consecutive columns.
TEST(AttentionHeads, SplitFollowsTheDocumentedLayoutAndItsBackwardInvertsIt) {
  const std::size_t B = 2, H = 3, T = 5, D = 4;
  const std::size_t width = 3 * H * D;
  std::vector<float> qkv(B * T * width);
  for (std::size_t i = 0; i < qkv.size(); ++i)
    qkv[i] = static_cast<float>(i);  // every element distinct and exact
  std::vector<float> q(B * H * T * D), k(q.size()), v(q.size());
  cpu::split_heads(qkv.data(), q.data(), k.data(), v.data(), B, H, T, D);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t d = 0; d < D; ++d) {
          const std::size_t head = ((b * H + h) * T + t) * D + d;
          const float* row = qkv.data() + (b * T + t) * width;
          ASSERT_EQ(q[head], row[h * 3 * D + 0 * D + d]) << b << h << t << d;
          ASSERT_EQ(k[head], row[h * 3 * D + 1 * D + d]) << b << h << t << d;
          ASSERT_EQ(v[head], row[h * 3 * D + 2 * D + d]) << b << h << t << d;
        }
  std::vector<float> back(qkv.size(), kNaN);
  cpu::split_heads_backward(q.data(), k.data(), v.data(), back.data(), B, H, T, D);
  EXPECT_EQ(back, qkv);
}

TEST(AttentionHeads, MergePutsHeadHAtColumnsHTimesDAndItsBackwardInvertsIt) {
  const std::size_t B = 3, H = 2, T = 4, D = 3;
  std::vector<float> o(B * H * T * D);
  for (std::size_t i = 0; i < o.size(); ++i)
    o[i] = static_cast<float>(i);
  std::vector<float> y(B * T * H * D, kNaN);
  cpu::merge_heads(o.data(), y.data(), B, H, T, D);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t d = 0; d < D; ++d)
          ASSERT_EQ(y[(b * T + t) * H * D + h * D + d], o[((b * H + h) * T + t) * D + d]);
  std::vector<float> back(o.size(), kNaN);
  cpu::merge_heads_backward(y.data(), back.data(), B, H, T, D);
  EXPECT_EQ(back, o);
}

TEST(AttentionHeads, RefusesOverflowingSizesAndNullPointers) {
  std::vector<float> x(64);
  const std::size_t huge = std::size_t{1} << 40;
  try {
    cpu::split_heads(x.data(), x.data(), x.data(), x.data(), huge, huge, 2, 2);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("overflow"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cpu::merge_heads(nullptr, x.data(), 1, 2, 2, 2), UsageError);
  EXPECT_NO_THROW(cpu::merge_heads(nullptr, nullptr, 0, 2, 2, 2));  // empty: nothing to move
}

// Each product against float64, over the transposes, padded leading dimensions, a shared operand (stride 0) and
// beta = 1 accumulation.
TEST(BatchedGemm, MatchesFloat64ProductsForEveryTransposeAndStride) {
  const std::size_t m = 7, n = 5, k = 9, batch = 4;
  for (bool a_t : {false, true})
    for (bool b_t : {false, true})
      for (std::size_t b_stride_kind : {0, 1}) {
        const std::size_t lda = (a_t ? m : k) + 2, ldb = (b_t ? k : n) + 1, ldc = n + 3;
        const std::size_t a_rows = a_t ? k : m, b_rows = b_t ? n : k;
        const std::size_t sa = a_rows * lda + 5, sb = b_stride_kind == 0 ? 0 : b_rows * ldb, sc = m * ldc + 1;
        const std::vector<float> a = random_floats(batch * sa, -1.0f, 1.0f, 1);
        const std::vector<float> b = random_floats(batch * b_rows * ldb, -1.0f, 1.0f, 2);
        std::vector<float> c = random_floats(batch * sc, -1.0f, 1.0f, 3);
        std::vector<double> expected = widen(c);
        for (std::size_t i = 0; i < batch; ++i)
          for (std::size_t r = 0; r < m; ++r)
            for (std::size_t col = 0; col < n; ++col) {
              double s = 0.0;
              for (std::size_t x = 0; x < k; ++x) {
                const double av = a_t ? a[i * sa + x * lda + r] : a[i * sa + r * lda + x];
                const double bv = b_t ? b[i * sb + col * ldb + x] : b[i * sb + x * ldb + col];
                s += av * bv;
              }
              double& e = expected[i * sc + r * ldc + col];
              e = 0.5 * s + e;  // alpha 0.5, beta 1
            }
        cpu::batched_gemm(a_t ? Trans::Yes : Trans::No, b_t ? Trans::Yes : Trans::No, m, n, k, 0.5f, a.data(), lda, sa,
                          b.data(), ldb, sb, 1.0f, c.data(), ldc, sc, batch);
        // Measured: <= 1.5e-7 (k = 9 products of values in [-1, 1]); the padding between rows and matrices, compared
        // too, is untouched.
        EXPECT_TRUE(all_close(c, expected, 0.0, 1e-6)) << a_t << b_t << b_stride_kind;
      }
}

TEST(BatchedGemm, RefusesOverlappingOutputsAndOversizedBatches) {
  std::vector<float> x(1024);
  try {
    cpu::batched_gemm(Trans::No, Trans::No, 4, 4, 4, 1.0f, x.data(), 4, 16, x.data(), 4, 16, 0.0f, x.data(), 4, 8, 2);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("stride_c = 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cpu::batched_gemm(Trans::No, Trans::No, 1, 1, 1, 1.0f, x.data(), 1, 1, x.data(), 1, 1, 0.0f, x.data(), 1,
                                 1, std::size_t{1} << 31),
               UsageError);
  EXPECT_THROW(cpu::batched_gemm(Trans::No, Trans::No, 1, 1, 1, 1.0f, x.data(), 1, std::size_t{1} << 62, x.data(), 1, 1,
                                 0.0f, x.data(), 1, 1, 8),
               UsageError);
  EXPECT_NO_THROW(
      cpu::batched_gemm(Trans::No, Trans::No, 4, 4, 4, 1.0f, nullptr, 4, 16, nullptr, 4, 16, 0.0f, nullptr, 4, 16, 0));
}

// Scores of both signs and large magnitude (exp of them would overflow fp32 without the row maximum), T not a multiple
// of the 16 reduction lanes, and NaN above the diagonal, which must be neither read nor kept.
TEST(CausalSoftmax, ForwardMatchesFloat64AndZeroesTheMaskedHalf) {
  for (std::size_t T : {1, 37, 64}) {
    const std::size_t blocks = 3;
    const float scale = 0.125f;
    std::vector<float> s = random_floats(blocks * T * T, -800.0f, 800.0f, 4);
    for (std::size_t r = 0; r < blocks * T; ++r)
      for (std::size_t j = r % T + 1; j < T; ++j)
        s[r * T + j] = kNaN;
    const std::vector<double> expected = test::ref_causal_softmax(widen(s), blocks, T, scale);
    cpu::causal_softmax_forward(s.data(), blocks, T, scale);
    // Measured: <= 8.1e-8 (a few ulp of probabilities <= 1; the tiniest underflow to 0 in fp32, hence no relative
    // tolerance).
    EXPECT_TRUE(all_close(s, expected, 0.0, 4e-7)) << "T " << T;
    for (std::size_t r = 0; r < blocks * T; ++r)
      for (std::size_t j = r % T + 1; j < T; ++j)
        ASSERT_EQ(s[r * T + j], 0.0f) << "row " << r << " column " << j;
  }
}

TEST(CausalSoftmax, BackwardMatchesFloat64InAndOutOfPlace) {
  const std::size_t blocks = 3, T = 45;
  const float scale = 0.35f;
  std::vector<float> s = random_floats(blocks * T * T, -4.0f, 4.0f, 5);
  cpu::causal_softmax_forward(s.data(), blocks, T, scale);
  std::vector<float> dp = random_floats(blocks * T * T, -1.0f, 1.0f, 6);
  for (std::size_t r = 0; r < blocks * T; ++r)
    for (std::size_t j = r % T + 1; j < T; ++j)
      dp[r * T + j] = kNaN;  // never read
  const std::vector<double> expected = test::ref_causal_softmax_backward(widen(s), widen(dp), blocks, T, scale);
  std::vector<float> ds(dp.size(), 7.0f);
  cpu::causal_softmax_backward(s.data(), dp.data(), ds.data(), blocks, T, scale);
  // Measured: 7.0e-9 (scale * p * (dp - dot) with |dp| <= 1).
  EXPECT_TRUE(all_close(ds, expected, 0.0, 5e-8));
  cpu::causal_softmax_backward(s.data(), dp.data(), dp.data(), blocks, T, scale);
  EXPECT_EQ(dp, ds) << "in place gives the same bits";
}

// The softmax's fast exp is vector_exp bit for bit on its domain (finite x <= 0), the flush to 0 below -87.34 included.
TEST(CausalSoftmax, FastExpEqualsVectorExpOnNonPositiveArguments) {
  for (float x = 0.0f; x > -100.0f; x = std::nextafter(x, -200.0f) - 1e-4f * std::fabs(x))
    ASSERT_EQ(float_bits(detail::softmax_exp(x)), float_bits(detail::vector_exp(x))) << x;
  for (float x : {-0.0f, -1e-30f, -87.3365f, -87.3366f, -1e30f, -3.4e38f})
    ASSERT_EQ(float_bits(detail::softmax_exp(x)), float_bits(detail::vector_exp(x))) << x;
}

// Non-finite scores are not hidden: a NaN or +inf score makes its row NaN, a -inf score gets probability 0.
TEST(CausalSoftmax, NonFiniteScoresStayVisible) {
  const std::size_t T = 20;
  std::vector<float> s = random_floats(T * T, -2.0f, 2.0f, 7);
  s[10 * T + 3] = kNaN;
  s[12 * T + 12] = INFINITY;
  s[15 * T + 0] = -INFINITY;
  cpu::causal_softmax_forward(s.data(), 1, T, 0.5f);
  for (std::size_t j = 0; j <= 12; ++j) {
    EXPECT_TRUE(std::isnan(s[10 * T + j]) || j > 10) << j;
    EXPECT_TRUE(std::isnan(s[12 * T + j])) << j;
  }
  EXPECT_EQ(s[15 * T + 0], 0.0f);
  double sum = 0.0;
  for (std::size_t j = 0; j <= 15; ++j)
    sum += s[15 * T + j];
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_FALSE(std::isnan(s[11 * T + 2]));
}

TEST(CausalSoftmax, RefusesANonFiniteScaleAndOverflowingSizes) {
  std::vector<float> s(16, 0.0f);
  EXPECT_THROW(cpu::causal_softmax_forward(s.data(), 1, 4, kNaN), UsageError);
  EXPECT_THROW(cpu::causal_softmax_backward(s.data(), s.data(), s.data(), 1, 4, INFINITY), UsageError);
  EXPECT_THROW(cpu::causal_softmax_forward(s.data(), std::size_t{1} << 40, std::size_t{1} << 20, 1.0f), UsageError);
  EXPECT_THROW(cpu::causal_softmax_backward(nullptr, s.data(), s.data(), 1, 4, 1.0f), UsageError);
}

}  // namespace
}  // namespace tenax::kernels
