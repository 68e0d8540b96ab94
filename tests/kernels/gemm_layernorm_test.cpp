// The OpenBLAS-backed gemm against a float64 triple loop, and layer normalisation against float64 formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/gemm.hpp"
#include "tenax/kernels/layernorm.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::random_floats;

// Element (i, j) of op(X) for X stored row-major with row stride ld.
double at(const std::vector<float>& x, std::size_t ld, bool transposed, std::size_t i, std::size_t j) {
  return transposed ? x[j * ld + i] : x[i * ld + j];
}

TEST(GemmTest, MatchesFloat64ForEveryTransposeAndPaddedStrides) {
  const std::size_t m = 23, n = 17, k = 31, pad = 3;
  const float alpha = 0.75f, beta = -0.5f;
  for (Trans ta : {Trans::No, Trans::Yes}) {
    for (Trans tb : {Trans::No, Trans::Yes}) {
      const bool a_t = ta == Trans::Yes, b_t = tb == Trans::Yes;
      const std::size_t lda = (a_t ? m : k) + pad, ldb = (b_t ? k : n) + pad, ldc = n + pad;
      const std::vector<float> a = random_floats((a_t ? k : m) * lda, -1.0f, 1.0f, 1);
      const std::vector<float> b = random_floats((b_t ? n : k) * ldb, -1.0f, 1.0f, 2);
      std::vector<float> c = random_floats(m * ldc, -1.0f, 1.0f, 3);
      std::vector<double> expected(c.begin(), c.end());  // the padding columns must stay untouched
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          double dot = 0;
          for (std::size_t p = 0; p < k; ++p)
            dot += at(a, lda, a_t, i, p) * at(b, ldb, b_t, p, j);
          expected[i * ldc + j] = alpha * dot + beta * double{c[i * ldc + j]};
        }
      }
      cpu::gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      EXPECT_TRUE(all_close(c, expected, 1e-5, 1e-5)) << "ta " << a_t << " tb " << b_t;
    }
  }
}

TEST(GemmTest, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1.0f, 2.0f, 3.0f, 4.0f};
  const float dummy = 0.0f;
  cpu::gemm(Trans::No, Trans::No, 2, 2, 0, 1.0f, &dummy, 1, &dummy, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
}

TEST(GemmTest, RejectsStridesShorterThanTheRows) {
  std::vector<float> a(64), b(64), c(64);
  EXPECT_THROW(cpu::gemm(Trans::No, Trans::No, 4, 4, 4, 1.0f, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4), UsageError);
  EXPECT_THROW(cpu::gemm(Trans::No, Trans::Yes, 4, 5, 3, 1.0f, a.data(), 3, b.data(), 2, 0.0f, c.data(), 5),
               UsageError);
  EXPECT_THROW(cpu::gemm(Trans::Yes, Trans::No, 4, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 3),
               UsageError);
}

struct LayerNorm64 {
  std::vector<double> y, mean, rstd;
};

LayerNorm64 layernorm64(const std::vector<float>& x, const std::vector<float>& gamma, const std::vector<float>& beta,
                        std::size_t rows, std::size_t cols, double eps) {
  LayerNorm64 out{std::vector<double>(rows * cols), std::vector<double>(rows), std::vector<double>(rows)};
  for (std::size_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (std::size_t c = 0; c < cols; ++c)
      mu += x[r * cols + c];
    mu /= cols;
    for (std::size_t c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mu) * (x[r * cols + c] - mu);
    const double rs = 1.0 / std::sqrt(var / cols + eps);
    out.mean[r] = mu;
    out.rstd[r] = rs;
    for (std::size_t c = 0; c < cols; ++c)
      out.y[r * cols + c] = (x[r * cols + c] - mu) * rs * gamma[c] + beta[c];
  }
  return out;
}

TEST(LayerNormTest, ForwardMatchesFloat64EvenWithALargeMean) {
  const std::size_t rows = 13, cols = 257;
  std::vector<float> x = random_floats(rows * cols, -2.0f, 2.0f, 4);
  for (std::size_t c = 0; c < cols; ++c)
    x[c] += 1000.0f;  // row 0: large mean, small spread
  const std::vector<float> gamma = random_floats(cols, 0.5f, 1.5f, 5);
  const std::vector<float> beta = random_floats(cols, -0.5f, 0.5f, 6);
  std::vector<float> y(rows * cols), mean(rows), rstd(rows);
  cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
  const LayerNorm64 expected = layernorm64(x, gamma, beta, rows, cols, 1e-5);
  EXPECT_TRUE(all_close(mean, expected.mean, 1e-7, 1e-7));
  EXPECT_TRUE(all_close(rstd, expected.rstd, 1e-6, 0));
  // Row 0 loses ~1000 * 2^-24 to the fp32 subtraction x - mean, scaled by rstd ~ 0.9.
  EXPECT_TRUE(all_close(y, expected.y, 1e-5, 1e-4));
  std::vector<float> in_place = x;  // y may alias x
  cpu::layernorm_forward(in_place.data(), gamma.data(), beta.data(), in_place.data(), mean.data(), rstd.data(), rows,
                         cols, 1e-5f);
  EXPECT_EQ(in_place, y);
  EXPECT_THROW(
      cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 0.0f),
      UsageError);
}

TEST(LayerNormTest, BackwardMatchesFiniteDifferencesOfTheFloat64Forward) {
  const std::size_t rows = 5, cols = 33;
  const double eps = 1e-5;
  std::vector<float> x = random_floats(rows * cols, -2.0f, 2.0f, 7);
  const std::vector<float> gamma = random_floats(cols, 0.5f, 1.5f, 8);
  const std::vector<float> beta = random_floats(cols, -0.5f, 0.5f, 9);
  const std::vector<float> dy = random_floats(rows * cols, -1.0f, 1.0f, 10);
  std::vector<float> y(rows * cols), mean(rows), rstd(rows);
  cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
  std::vector<float> dx(rows * cols);
  std::vector<float> dgamma = random_floats(cols, -1.0f, 1.0f, 11);  // accumulated into
  std::vector<float> dbeta = random_floats(cols, -1.0f, 1.0f, 12);
  std::vector<double> expected_dgamma(dgamma.begin(), dgamma.end());
  std::vector<double> expected_dbeta(dbeta.begin(), dbeta.end());
  cpu::layernorm_backward(x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dgamma.data(),
                          dbeta.data(), rows, cols);

  // L = sum dy * y(x): dL/dx by central differences of the float64 forward; dgamma, dbeta directly.
  auto objective = [&](const std::vector<float>& xs) {
    const LayerNorm64 f = layernorm64(xs, gamma, beta, rows, cols, eps);
    double l = 0;
    for (std::size_t i = 0; i < f.y.size(); ++i)
      l += dy[i] * f.y[i];
    return l;
  };
  std::vector<double> expected_dx(rows * cols);
  std::vector<float> probe = x;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float h = 1e-3f;
    probe[i] = x[i] + h;
    const double up = objective(probe);
    probe[i] = x[i] - h;
    const double down = objective(probe);
    probe[i] = x[i];
    expected_dx[i] = (up - down) / (2.0 * h);
  }
  const LayerNorm64 f = layernorm64(x, gamma, beta, rows, cols, eps);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      expected_dgamma[c] += dy[r * cols + c] * (x[r * cols + c] - f.mean[r]) * f.rstd[r];
      expected_dbeta[c] += dy[r * cols + c];
    }
  }
  EXPECT_TRUE(all_close(dx, expected_dx, 1e-4, 1e-5));
  std::vector<float> in_place = dy;  // dx may alias dy
  std::vector<float> scratch_dgamma(cols, 0.0f), scratch_dbeta(cols, 0.0f);
  cpu::layernorm_backward(x.data(), gamma.data(), mean.data(), rstd.data(), in_place.data(), in_place.data(),
                          scratch_dgamma.data(), scratch_dbeta.data(), rows, cols);
  EXPECT_EQ(in_place, dx);
  EXPECT_TRUE(all_close(dgamma, expected_dgamma, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(dbeta, expected_dbeta, 1e-6, 1e-6));
}

}  // namespace
}  // namespace tenax::kernels
