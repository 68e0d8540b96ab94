// Bias + GeLU and softmax cross-entropy against float64 formulas; the analytic gradients against finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/loss.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::random_floats;
using test::random_tokens;

// 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)) (the same function): in the tanh form even float64 loses all
// accuracy for x < -6, where 1 + tanh(u) cancels to a few units of 2^-52.
double gelu64(double x) {
  const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

TEST(BiasGeluTest, Float64ReferenceIsTheTanhFormula) {
  for (double x = -3.0; x <= 3.0; x += 0.125) {
    const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
    EXPECT_NEAR(gelu64(x), 0.5 * x * (1.0 + std::tanh(u)), 1e-15) << "x = " << x;
  }
}

// The derivative by central differences of the float64 formula: an independent check of the analytic derivative.
double gelu64_grad(double x) {
  const double h = 1e-6;
  return (gelu64(x + h) - gelu64(x - h)) / (2 * h);
}

TEST(BiasGeluTest, ForwardMatchesFloat64) {
  const std::size_t rows = 37, cols = 129;
  const std::vector<float> in = random_floats(rows * cols, -6.0f, 6.0f, 1);
  const std::vector<float> bias = random_floats(cols, -1.0f, 1.0f, 2);
  std::vector<float> out(rows * cols);
  cpu::bias_gelu_forward(in.data(), bias.data(), out.data(), rows, cols);
  std::vector<double> expected(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      expected[r * cols + c] =
          gelu64(double{in[r * cols + c] + bias[c]});  // the sum is rounded in fp32 as in the kernel
  // Relative accuracy everywhere, including the tiny outputs of negative inputs (no cancellation in 1 + tanh): the
  // only error source is the fp32 rounding of the tanh argument u, which exp(-2u) amplifies by |2u| (~36 at x = -7).
  EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-30));

  std::vector<float> in_place = in;  // out may alias in
  cpu::bias_gelu_forward(in_place.data(), bias.data(), in_place.data(), rows, cols);
  EXPECT_EQ(in_place, out);
}

TEST(BiasGeluTest, BackwardMatchesFiniteDifferencesAndAccumulatesTheBiasGradient) {
  const std::size_t rows = 41, cols = 67;
  const std::vector<float> in = random_floats(rows * cols, -5.0f, 5.0f, 3);
  const std::vector<float> bias = random_floats(cols, -1.0f, 1.0f, 4);
  const std::vector<float> dout = random_floats(rows * cols, -1.0f, 1.0f, 5);
  std::vector<float> din(rows * cols);
  std::vector<float> dbias = random_floats(cols, -1.0f, 1.0f, 6);  // accumulated into, not overwritten
  const std::vector<float> dbias_before = dbias;
  cpu::bias_gelu_backward(in.data(), bias.data(), dout.data(), din.data(), dbias.data(), rows, cols);

  std::vector<double> expected_din(rows * cols);
  std::vector<double> expected_dbias(dbias_before.begin(), dbias_before.end());
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const double d = dout[r * cols + c] * gelu64_grad(double{in[r * cols + c] + bias[c]});
      expected_din[r * cols + c] = d;
      expected_dbias[c] += d;
    }
  }
  EXPECT_TRUE(all_close(din, expected_din, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(dbias, expected_dbias, 1e-5, 1e-5));

  std::vector<float> in_place = dout;  // din may alias dout
  std::vector<float> dbias2(cols, 0.0f);
  cpu::bias_gelu_backward(in.data(), bias.data(), in_place.data(), in_place.data(), dbias2.data(), rows, cols);
  EXPECT_EQ(in_place, din);
}

// The loss and its gradient in float64 (log-softmax with the maximum subtracted).
struct CrossEntropy64 {
  double loss_sum = 0;
  std::vector<double> grad;
};

CrossEntropy64 cross_entropy64(const std::vector<float>& logits, const std::vector<std::int32_t>& targets,
                               std::size_t vocab, double grad_scale) {
  const std::size_t rows = targets.size();
  CrossEntropy64 out;
  out.grad.resize(logits.size());
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = logits.data() + r * vocab;
    double max = x[0];
    for (std::size_t j = 0; j < vocab; ++j)
      max = std::max(max, double{x[j]});
    double sum = 0;
    for (std::size_t j = 0; j < vocab; ++j)
      sum += std::exp(x[j] - max);
    const double lse = max + std::log(sum);
    out.loss_sum += lse - x[targets[r]];
    for (std::size_t j = 0; j < vocab; ++j) {
      const double p = std::exp(x[j] - lse);
      out.grad[r * vocab + j] = (p - (j == static_cast<std::size_t>(targets[r]) ? 1.0 : 0.0)) * grad_scale / rows;
    }
  }
  return out;
}

TEST(CrossEntropyTest, LossAndGradientMatchFloat64) {
  const std::size_t rows = 19, vocab = 1031;
  const float grad_scale = 1024.0f;  // a loss scale folded into the gradient
  const std::vector<float> logits = random_floats(rows * vocab, -8.0f, 8.0f, 7);
  const std::vector<std::int32_t> targets = random_tokens(rows, vocab, 8);
  std::vector<float> dlogits(rows * vocab);
  const double loss =
      cpu::softmax_cross_entropy(logits.data(), targets.data(), dlogits.data(), rows, vocab, grad_scale);
  const CrossEntropy64 expected = cross_entropy64(logits, targets, vocab, grad_scale);
  EXPECT_NEAR(loss, expected.loss_sum, 1e-6 * expected.loss_sum);
  EXPECT_TRUE(all_close(dlogits, expected.grad, 1e-5, 1e-7));

  EXPECT_EQ(cpu::softmax_cross_entropy(logits.data(), targets.data(), nullptr, rows, vocab, grad_scale), loss)
      << "the loss must not depend on whether the gradient is written";
  std::vector<float> in_place = logits;  // dlogits may alias logits
  EXPECT_EQ(cpu::softmax_cross_entropy(in_place.data(), targets.data(), in_place.data(), rows, vocab, grad_scale),
            loss);
  EXPECT_EQ(in_place, dlogits);
}

TEST(CrossEntropyTest, GradientMatchesFiniteDifferencesOfTheLoss) {
  const std::size_t rows = 3, vocab = 17;
  std::vector<float> logits = random_floats(rows * vocab, -3.0f, 3.0f, 9);
  const std::vector<std::int32_t> targets = random_tokens(rows, vocab, 10);
  std::vector<float> dlogits(rows * vocab);
  // grad_scale = rows makes dlogits the gradient of the loss SUM, which is what the function returns.
  cpu::softmax_cross_entropy(logits.data(), targets.data(), dlogits.data(), rows, vocab, static_cast<float>(rows));
  const float h = 1e-2f;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float saved = logits[i];
    logits[i] = saved + h;
    const double up = cpu::softmax_cross_entropy(logits.data(), targets.data(), nullptr, rows, vocab, 1.0f);
    logits[i] = saved - h;
    const double down = cpu::softmax_cross_entropy(logits.data(), targets.data(), nullptr, rows, vocab, 1.0f);
    logits[i] = saved;
    // Central differences are O(h^2) accurate: ~1e-5 here, plus the loss's fp32 rounding divided by 2h.
    EXPECT_NEAR(dlogits[i], (up - down) / (2.0 * h), 2e-5) << "logit " << i;
  }
}

TEST(CrossEntropyTest, HugeLogitsDoNotOverflow) {
  const std::size_t vocab = 8;
  const std::vector<float> logits = {1e30f, -1e30f, 3e4f, 0.0f, 1e30f, 5.0f, -7.0f, 1e30f};
  const std::vector<std::int32_t> targets = {4};
  std::vector<float> dlogits(vocab);
  const double loss = cpu::softmax_cross_entropy(logits.data(), targets.data(), dlogits.data(), 1, vocab, 1.0f);
  EXPECT_NEAR(loss, std::log(3.0), 1e-6);  // three equal maxima: p = 1/3 each
  EXPECT_NEAR(dlogits[4], 1.0 / 3 - 1.0, 1e-6);
  EXPECT_NEAR(dlogits[0], 1.0 / 3, 1e-6);
  EXPECT_EQ(dlogits[1], 0.0f);
}

TEST(CrossEntropyTest, RejectsTargetsOutsideTheVocabulary) {
  const std::vector<float> logits(2 * 5, 0.0f);
  for (std::int32_t bad : {-1, 5, 1000}) {
    const std::vector<std::int32_t> targets = {0, bad};
    try {
      cpu::softmax_cross_entropy(logits.data(), targets.data(), nullptr, 2, 5, 1.0f);
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("targets[1]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tenax::kernels
