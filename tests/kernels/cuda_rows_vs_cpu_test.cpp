// CUDA row kernels (bias + GeLU, softmax cross-entropy, layer norm) against the CPU references, with row lengths that
// take the vector path (multiple of 4) and the scalar path (odd).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_test_util.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/layernorm.hpp"
#include "tenax/kernels/loss.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::CudaKernelTest;
using test::DeviceBuffer;
using test::random_floats;
using test::random_tokens;
using test::to_double;

using CudaRowsTest = CudaKernelTest;
constexpr std::size_t kColsCases[] = {768, 771};

TEST_F(CudaRowsTest, BiasGeluForwardAndBackwardMatchTheCpu) {
  const std::size_t rows = 333;
  for (std::size_t cols : kColsCases) {
    const std::vector<float> in = random_floats(rows * cols, -5.0f, 5.0f, 1);
    const std::vector<float> bias = random_floats(cols, -1.0f, 1.0f, 2);
    const std::vector<float> dout = random_floats(rows * cols, -1.0f, 1.0f, 3);
    std::vector<float> out(rows * cols), din(rows * cols);
    std::vector<float> dbias = random_floats(cols, -1.0f, 1.0f, 4);
    DeviceBuffer<float> d_in(in), d_bias(bias), d_dout(dout), d_out(rows * cols), d_din(rows * cols), d_dbias(dbias);
    cpu::bias_gelu_forward(in.data(), bias.data(), out.data(), rows, cols);
    cpu::bias_gelu_backward(in.data(), bias.data(), dout.data(), din.data(), dbias.data(), rows, cols);
    cuda::bias_gelu_forward(d_in.get(), d_bias.get(), d_out.get(), rows, cols, nullptr);
    cuda::bias_gelu_backward(d_in.get(), d_bias.get(), d_dout.get(), d_din.get(), d_dbias.get(), rows, cols, nullptr);
    EXPECT_TRUE(all_close(d_out.download(), to_double(out), 2e-6, 1e-7)) << "cols " << cols;
    EXPECT_TRUE(all_close(d_din.download(), to_double(din), 1e-5, 1e-7)) << "cols " << cols;
    EXPECT_TRUE(all_close(d_dbias.download(), to_double(dbias), 1e-5, 1e-5)) << "cols " << cols;
  }
}

TEST_F(CudaRowsTest, CrossEntropyMatchesTheCpu) {
  const std::size_t rows = 97;
  for (std::size_t vocab : {std::size_t{8192}, std::size_t{5003}}) {
    const std::vector<float> logits = random_floats(rows * vocab, -10.0f, 10.0f, 5);
    const std::vector<std::int32_t> targets = random_tokens(rows, vocab, 6);
    std::vector<float> dlogits(rows * vocab);
    const double loss = cpu::softmax_cross_entropy(logits.data(), targets.data(), dlogits.data(), rows, vocab, 8.0f);
    DeviceBuffer<float> d_logits(logits), d_dlogits(rows * vocab);
    DeviceBuffer<std::int32_t> d_targets(targets);
    DeviceBuffer<double> d_loss(std::vector<double>{123.0});  // written, not added to
    cuda::softmax_cross_entropy(d_logits.get(), d_targets.get(), d_dlogits.get(), rows, vocab, 8.0f, d_loss.get(),
                                nullptr);
    EXPECT_NEAR(d_loss.download()[0], loss, 1e-6 * loss) << "vocab " << vocab;
    EXPECT_TRUE(all_close(d_dlogits.download(), to_double(dlogits), 1e-5, 1e-9)) << "vocab " << vocab;

    // In place (dlogits aliasing logits), and the loss alone.
    cuda::softmax_cross_entropy(d_logits.get(), d_targets.get(), d_logits.get(), rows, vocab, 8.0f, d_loss.get(),
                                nullptr);
    EXPECT_NEAR(d_loss.download()[0], loss, 1e-6 * loss);
    EXPECT_TRUE(all_close(d_logits.download(), to_double(dlogits), 1e-5, 1e-9));
    d_logits.upload(logits);
    cuda::softmax_cross_entropy(d_logits.get(), d_targets.get(), nullptr, rows, vocab, 8.0f, d_loss.get(), nullptr);
    EXPECT_NEAR(d_loss.download()[0], loss, 1e-6 * loss);
  }
}

TEST_F(CudaRowsTest, CrossEntropyWithATargetOutsideTheVocabularyGivesNaN) {
  const std::size_t rows = 4, vocab = 64;
  const std::vector<float> logits = random_floats(rows * vocab, -1.0f, 1.0f, 7);
  DeviceBuffer<float> d_logits(logits), d_dlogits(rows * vocab);
  DeviceBuffer<std::int32_t> d_targets(std::vector<std::int32_t>{1, 2, 64, 3});
  DeviceBuffer<double> d_loss(1);
  cuda::softmax_cross_entropy(d_logits.get(), d_targets.get(), d_dlogits.get(), rows, vocab, 1.0f, d_loss.get(),
                              nullptr);
  EXPECT_TRUE(std::isnan(d_loss.download()[0]));
  EXPECT_TRUE(std::isnan(d_dlogits.download()[2 * vocab]));
}

TEST_F(CudaRowsTest, LayerNormForwardAndBackwardMatchTheCpu) {
  const std::size_t rows = 129;
  for (std::size_t cols : kColsCases) {
    const std::vector<float> x = random_floats(rows * cols, -3.0f, 3.0f, 8);
    const std::vector<float> gamma = random_floats(cols, 0.5f, 1.5f, 9), beta = random_floats(cols, -0.5f, 0.5f, 10);
    const std::vector<float> dy = random_floats(rows * cols, -1.0f, 1.0f, 11);
    std::vector<float> y(rows * cols), mean(rows), rstd(rows), dx(rows * cols);
    std::vector<float> dgamma = random_floats(cols, -1.0f, 1.0f, 12), dbeta = random_floats(cols, -1.0f, 1.0f, 13);
    DeviceBuffer<float> d_x(x), d_gamma(gamma), d_beta(beta), d_dy(dy), d_y(rows * cols), d_mean(rows), d_rstd(rows);
    DeviceBuffer<float> d_dx(rows * cols), d_dgamma(dgamma), d_dbeta(dbeta);
    cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
    cpu::layernorm_backward(x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dgamma.data(),
                            dbeta.data(), rows, cols);
    cuda::layernorm_forward(d_x.get(), d_gamma.get(), d_beta.get(), d_y.get(), d_mean.get(), d_rstd.get(), rows, cols,
                            1e-5f, nullptr);
    EXPECT_TRUE(all_close(d_mean.download(), to_double(mean), 1e-5, 1e-6)) << "cols " << cols;
    EXPECT_TRUE(all_close(d_rstd.download(), to_double(rstd), 1e-5, 0)) << "cols " << cols;
    EXPECT_TRUE(all_close(d_y.download(), to_double(y), 1e-5, 1e-5)) << "cols " << cols;
    // Backward from the CPU's saved statistics, so it is compared on identical inputs.
    d_mean.upload(mean);
    d_rstd.upload(rstd);
    cuda::layernorm_backward(d_x.get(), d_gamma.get(), d_mean.get(), d_rstd.get(), d_dy.get(), d_dx.get(),
                             d_dgamma.get(), d_dbeta.get(), rows, cols, nullptr);
    EXPECT_TRUE(all_close(d_dx.download(), to_double(dx), 1e-4, 1e-5)) << "cols " << cols;
    EXPECT_TRUE(all_close(d_dgamma.download(), to_double(dgamma), 1e-5, 1e-5)) << "cols " << cols;
    EXPECT_TRUE(all_close(d_dbeta.download(), to_double(dbeta), 1e-5, 1e-5)) << "cols " << cols;
  }
}

}  // namespace
}  // namespace tenax::kernels
