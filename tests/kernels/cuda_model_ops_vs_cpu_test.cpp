// CUDA versions of the model's small kernels (residual add, bias, embedding, vocabulary-parallel cross-entropy phases)
// and the mixed-precision matrix product against the CPU references. Row lengths take the vector path (multiple of 4)
// and the scalar path (odd).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/elementwise.hpp"
#include "tenax/kernels/embedding.hpp"
#include "tenax/kernels/gemm.hpp"
#include "tenax/kernels/vocab_parallel_loss.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::CudaKernelTest;
using test::DeviceBuffer;
using test::random_floats;
using test::random_tokens;
using test::to_double;

using CudaModelOpsTest = CudaKernelTest;
constexpr std::size_t kColsCases[] = {768, 771};

TEST_F(CudaModelOpsTest, AddBiasAndBiasGradientMatchTheCpu) {
  const std::size_t rows = 301;
  for (std::size_t cols : kColsCases) {
    const std::vector<float> x = random_floats(rows * cols, -1.0f, 1.0f, 1);
    const std::vector<float> y0 = random_floats(rows * cols, -1.0f, 1.0f, 2);
    const std::vector<float> bias = random_floats(cols, -1.0f, 1.0f, 3);
    std::vector<float> dbias = random_floats(cols, -1.0f, 1.0f, 4);
    DeviceBuffer<float> d_x(x), d_y(y0), d_bias(bias), d_dbias(dbias);
    std::vector<float> y = y0;
    cpu::add_inplace(y.data(), x.data(), y.size());
    cpu::bias_add(y.data(), bias.data(), rows, cols);
    cpu::bias_grad(x.data(), dbias.data(), rows, cols);
    cuda::add_inplace(d_y.get(), d_x.get(), rows * cols, nullptr);
    cuda::bias_add(d_y.get(), d_bias.get(), rows, cols, nullptr);
    cuda::bias_grad(d_x.get(), d_dbias.get(), rows, cols, nullptr);
    EXPECT_TRUE(all_close(d_y.download(), to_double(y), 0.0, 0.0)) << "cols " << cols << ": element-wise, exact";
    EXPECT_TRUE(all_close(d_dbias.download(), to_double(dbias), 1e-5, 1e-5)) << "cols " << cols;
  }
}

TEST_F(CudaModelOpsTest, EmbeddingMatchesTheCpuAndPoisonsABadToken) {
  const std::size_t vocab = 97, rows = 211;
  for (std::size_t features : kColsCases) {
    const std::vector<float> table = random_floats(vocab * features, -1.0f, 1.0f, 5);
    const std::vector<float> dy = random_floats(rows * features, -1.0f, 1.0f, 6);
    std::vector<std::int32_t> tokens = random_tokens(rows, vocab, 7);
    std::vector<float> y(rows * features), grad(vocab * features, 0.25f);
    cpu::embedding_forward(tokens.data(), table.data(), y.data(), rows, features, vocab);
    cpu::embedding_backward(tokens.data(), dy.data(), grad.data(), rows, features);
    DeviceBuffer<std::int32_t> d_tokens(tokens);
    DeviceBuffer<float> d_table(table), d_dy(dy), d_y(rows * features),
        d_grad(std::vector<float>(vocab * features, 0.25f));
    cuda::embedding_forward(d_tokens.get(), d_table.get(), d_y.get(), rows, features, vocab, nullptr);
    cuda::embedding_backward(d_tokens.get(), d_dy.get(), d_grad.get(), rows, features, vocab, nullptr);
    EXPECT_TRUE(all_close(d_y.download(), to_double(y), 0.0, 0.0)) << "features " << features << ": a copy, exact";
    EXPECT_TRUE(all_close(d_grad.download(), to_double(grad), 1e-5, 1e-6)) << "features " << features;

    // A token outside the vocabulary: its row is NaN, the others unchanged, and its gradient is dropped.
    tokens[3] = static_cast<std::int32_t>(vocab);
    d_tokens.upload(tokens);
    cuda::embedding_forward(d_tokens.get(), d_table.get(), d_y.get(), rows, features, vocab, nullptr);
    const std::vector<float> poisoned = d_y.download();
    for (std::size_t c = 0; c < features; ++c)
      ASSERT_TRUE(std::isnan(poisoned[3 * features + c])) << c;
    EXPECT_EQ(poisoned[4 * features], y[4 * features]);
    d_grad.upload(std::vector<float>(vocab * features, 0.0f));
    cuda::embedding_backward(d_tokens.get(), d_dy.get(), d_grad.get(), rows, features, vocab, nullptr);
    for (float g : d_grad.download())
      ASSERT_FALSE(std::isnan(g));
  }
}

TEST_F(CudaModelOpsTest, EmbeddingSliceMatchesTheCpuAndPoisonsABadToken) {
  const std::size_t vocab = 97, rows = 211, vocab_begin = 40, vocab_local = 30;
  for (std::size_t features : kColsCases) {
    const std::vector<float> table = random_floats(vocab_local * features, -1.0f, 1.0f, 25);
    const std::vector<float> dy = random_floats(rows * features, -1.0f, 1.0f, 26);
    std::vector<std::int32_t> tokens = random_tokens(rows, vocab, 27);
    std::vector<float> y(rows * features), grad(vocab_local * features, 0.25f);
    cpu::embedding_slice_forward(tokens.data(), table.data(), y.data(), rows, features, vocab, vocab_begin,
                                 vocab_local);
    cpu::embedding_slice_backward(tokens.data(), dy.data(), grad.data(), rows, features, vocab_begin, vocab_local);
    DeviceBuffer<std::int32_t> d_tokens(tokens);
    DeviceBuffer<float> d_table(table), d_dy(dy), d_y(rows * features),
        d_grad(std::vector<float>(vocab_local * features, 0.25f));
    cuda::embedding_slice_forward(d_tokens.get(), d_table.get(), d_y.get(), rows, features, vocab, vocab_begin,
                                  vocab_local, nullptr);
    cuda::embedding_slice_backward(d_tokens.get(), d_dy.get(), d_grad.get(), rows, features, vocab_begin, vocab_local,
                                   nullptr);
    EXPECT_TRUE(all_close(d_y.download(), to_double(y), 0.0, 0.0)) << "features " << features << ": copies and zeros";
    EXPECT_TRUE(all_close(d_grad.download(), to_double(grad), 1e-5, 1e-6)) << "features " << features;

    // A token outside the vocabulary: its row is NaN on every slice (held or not), and its gradient is dropped.
    tokens[3] = -2;
    d_tokens.upload(tokens);
    cuda::embedding_slice_forward(d_tokens.get(), d_table.get(), d_y.get(), rows, features, vocab, vocab_begin,
                                  vocab_local, nullptr);
    const std::vector<float> poisoned = d_y.download();
    for (std::size_t c = 0; c < features; ++c)
      ASSERT_TRUE(std::isnan(poisoned[3 * features + c])) << c;
    EXPECT_EQ(poisoned[4 * features], y[4 * features]);
    d_grad.upload(std::vector<float>(vocab_local * features, 0.0f));
    cuda::embedding_slice_backward(d_tokens.get(), d_dy.get(), d_grad.get(), rows, features, vocab_begin, vocab_local,
                                   nullptr);
    for (float g : d_grad.download())
      ASSERT_FALSE(std::isnan(g));
  }
}

TEST_F(CudaModelOpsTest, VocabParallelPhasesMatchTheCpu) {
  const std::size_t rows = 67;
  for (std::size_t vocab_local : kColsCases) {
    const std::size_t vocab_begin = vocab_local, vocab = 2 * vocab_local;  // this rank holds the second half
    const std::vector<float> logits = random_floats(rows * vocab_local, -10.0f, 10.0f, 8);
    std::vector<std::int32_t> targets = random_tokens(rows, vocab, 9);
    std::vector<float> row_max(rows);
    std::vector<double> sums(2 * rows);
    std::vector<float> dlogits(rows * vocab_local);
    cpu::ce_row_max(logits.data(), rows, vocab_local, row_max.data());
    cpu::ce_row_sums(logits.data(), targets.data(), rows, vocab_local, vocab_begin, row_max.data(), sums.data());
    const double loss = cpu::ce_finish(logits.data(), targets.data(), dlogits.data(), rows, vocab_local, vocab_begin,
                                       row_max.data(), sums.data(), 0.5f);

    DeviceBuffer<float> d_logits(logits), d_row_max(rows), d_dlogits(rows * vocab_local);
    DeviceBuffer<std::int32_t> d_targets(targets);
    DeviceBuffer<double> d_sums(2 * rows), d_loss(std::vector<double>{1.5});
    cuda::ce_row_max(d_logits.get(), rows, vocab_local, d_row_max.get(), nullptr);
    EXPECT_TRUE(all_close(d_row_max.download(), to_double(row_max), 0.0, 0.0)) << "a maximum is exact";
    cuda::ce_row_sums(d_logits.get(), d_targets.get(), rows, vocab_local, vocab_begin, d_row_max.get(), d_sums.get(),
                      nullptr);
    const std::vector<double> got_sums = d_sums.download();
    for (std::size_t i = 0; i < 2 * rows; ++i)
      ASSERT_NEAR(got_sums[i], sums[i], 1e-5 * std::fabs(sums[i]) + 1e-30) << i;
    cuda::ce_finish(d_logits.get(), d_targets.get(), d_dlogits.get(), rows, vocab_local, vocab_begin, vocab,
                    d_row_max.get(), d_sums.get(), 0.5f, d_loss.get(), nullptr);
    EXPECT_NEAR(d_loss.download()[0], 1.5 + loss, 1e-5 * std::fabs(loss)) << "the loss is ADDED to the total";
    EXPECT_TRUE(all_close(d_dlogits.download(), to_double(dlogits), 1e-4, 1e-7)) << "vocab_local " << vocab_local;

    // In place (dlogits aliasing logits), as the layers call it.
    cuda::ce_finish(d_logits.get(), d_targets.get(), d_logits.get(), rows, vocab_local, vocab_begin, vocab,
                    d_row_max.get(), d_sums.get(), 0.5f, d_loss.get(), nullptr);
    EXPECT_TRUE(all_close(d_logits.download(), to_double(dlogits), 1e-4, 1e-7)) << "in place";

    // A target outside the vocabulary makes the loss NaN.
    targets[0] = -1;
    d_targets.upload(targets);
    d_logits.upload(logits);
    cuda::ce_finish(d_logits.get(), d_targets.get(), nullptr, rows, vocab_local, vocab_begin, vocab, d_row_max.get(),
                    d_sums.get(), 0.5f, d_loss.get(), nullptr);
    EXPECT_TRUE(std::isnan(d_loss.download()[0]));
  }
}

// Rows at a padded stride, as the output head keeps its logits: the same as the CPU, and the padding untouched.
TEST_F(CudaModelOpsTest, VocabParallelPhasesOnStridedRowsMatchTheCpu) {
  const std::size_t rows = 67, vocab_local = 1000, ld = 1024, vocab_begin = 0, vocab = 1500;
  std::vector<float> logits = random_floats(rows * ld, -10.0f, 10.0f, 18);
  for (std::size_t r = 0; r < rows; ++r)
    std::fill(logits.begin() + static_cast<std::ptrdiff_t>(r * ld + vocab_local),
              logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * ld), std::numeric_limits<float>::quiet_NaN());
  const std::vector<std::int32_t> targets = random_tokens(rows, vocab, 19);
  std::vector<float> row_max(rows), dlogits = logits;
  std::vector<double> sums(2 * rows);
  cpu::ce_row_max(logits.data(), rows, vocab_local, row_max.data(), ld);
  cpu::ce_row_sums(logits.data(), targets.data(), rows, vocab_local, vocab_begin, row_max.data(), sums.data(), ld);
  const double loss = cpu::ce_finish(logits.data(), targets.data(), dlogits.data(), rows, vocab_local, vocab_begin,
                                     row_max.data(), sums.data(), 0.5f, ld);

  DeviceBuffer<float> d_logits(logits), d_row_max(rows);
  DeviceBuffer<std::int32_t> d_targets(targets);
  DeviceBuffer<double> d_sums(2 * rows), d_loss(std::vector<double>{0.0});
  cuda::ce_row_max(d_logits.get(), rows, vocab_local, d_row_max.get(), nullptr, ld);
  EXPECT_TRUE(all_close(d_row_max.download(), to_double(row_max), 0.0, 0.0));
  cuda::ce_row_sums(d_logits.get(), d_targets.get(), rows, vocab_local, vocab_begin, d_row_max.get(), d_sums.get(),
                    nullptr, ld);
  const std::vector<double> got_sums = d_sums.download();
  for (std::size_t i = 0; i < 2 * rows; ++i)
    ASSERT_NEAR(got_sums[i], sums[i], 1e-5 * std::fabs(sums[i]) + 1e-30) << i;
  cuda::ce_finish(d_logits.get(), d_targets.get(), d_logits.get(), rows, vocab_local, vocab_begin, vocab,
                  d_row_max.get(), d_sums.get(), 0.5f, d_loss.get(), nullptr, ld);
  EXPECT_NEAR(d_loss.download()[0], loss, 1e-5 * std::fabs(loss));
  const std::vector<float> got = d_logits.download();
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < vocab_local; ++c)
      ASSERT_NEAR(got[r * ld + c], dlogits[r * ld + c], 1e-4 * std::fabs(dlogits[r * ld + c]) + 1e-7) << r << ", " << c;
    for (std::size_t c = vocab_local; c < ld; ++c)
      ASSERT_TRUE(std::isnan(got[r * ld + c])) << "padding written at " << r << ", " << c;
  }
}

// gemm_lowp multiplies the 16-bit values exactly (products of two 8- or 11-bit mantissas fit fp32) and accumulates in
// fp32: it must match the fp32 CPU product of the same rounded values up to summation order.
TEST_F(CudaModelOpsTest, LowPrecisionGemmMatchesTheCpuOnRoundedInputsForEveryTranspose) {
  const std::size_t m = 67, n = 45, k = 129, pad = 3;
  void* handle = cuda::create_blas_handle();
  for (DType type : {DType::BF16, DType::F16}) {
    for (Trans ta : {Trans::No, Trans::Yes}) {
      for (Trans tb : {Trans::No, Trans::Yes}) {
        const bool a_t = ta == Trans::Yes, b_t = tb == Trans::Yes;
        const std::size_t lda = (a_t ? m : k) + pad, ldb = (b_t ? k : n) + pad, ldc = n + pad;
        std::vector<float> a = random_floats((a_t ? k : m) * lda, -1.0f, 1.0f, 12);
        std::vector<float> b = random_floats((b_t ? n : k) * ldb, -1.0f, 1.0f, 13);
        std::vector<std::uint16_t> a16(a.size()), b16(b.size());
        cast_from_f32(a.data(), a16.data(), type, a.size());
        cast_from_f32(b.data(), b16.data(), type, b.size());
        cast_to_f32(a16.data(), type, a.data(), a.size());
        cast_to_f32(b16.data(), type, b.data(), b.size());
        std::vector<float> c = random_floats(m * ldc, -1.0f, 1.0f, 14);
        DeviceBuffer<std::uint16_t> d_a(a16), d_b(b16);
        DeviceBuffer<float> d_c(c);
        cpu::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), ldc);
        cuda::gemm_lowp(type, ta, tb, m, n, k, 0.5f, d_a.get(), lda, d_b.get(), ldb, 1.0f, d_c.get(), ldc, nullptr,
                        handle);
        EXPECT_TRUE(all_close(d_c.download(), to_double(c), 1e-5, 2e-5))
            << dtype_name(type) << " ta " << a_t << " tb " << b_t;
      }
    }
  }
  EXPECT_THROW(cuda::gemm_lowp(DType::F32, Trans::No, Trans::No, 1, 1, 1, 1.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr,
                               1, nullptr, handle),
               UsageError);
  cuda::destroy_blas_handle(handle);
}

TEST_F(CudaModelOpsTest, GemmWithTheCallersHandleMatchesTheCpu) {
  const std::size_t m = 33, n = 17, k = 65;
  const std::vector<float> a = random_floats(m * k, -1.0f, 1.0f, 15);
  const std::vector<float> b = random_floats(n * k, -1.0f, 1.0f, 16);
  std::vector<float> c(m * n);
  DeviceBuffer<float> d_a(a), d_b(b), d_c(m * n);
  void* handle = cuda::create_blas_handle();
  cudaStream_t stream = nullptr;
  TENAX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cpu::gemm(Trans::No, Trans::Yes, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  cuda::gemm(Trans::No, Trans::Yes, m, n, k, 1.0f, d_a.get(), k, d_b.get(), k, 0.0f, d_c.get(), n, stream, handle);
  TENAX_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_TRUE(all_close(d_c.download(), to_double(c), 1e-5, 2e-5));
  TENAX_CUDA_CHECK(cudaStreamDestroy(stream));
  cuda::destroy_blas_handle(handle);
}

}  // namespace
}  // namespace tenax::kernels
