// CPU references of the model's small kernels (residual add, bias and its gradient, embedding, the vocabulary-parallel
// cross-entropy phases) against float64 computations written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/elementwise.hpp"
#include "tenax/kernels/embedding.hpp"
#include "tenax/kernels/loss.hpp"
#include "tenax/kernels/vocab_parallel_loss.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::random_floats;
using test::random_tokens;

TEST(ModelOpsCpu, AddBiasAndBiasGradientMatchFloat64) {
  const std::size_t rows = 37, cols = 19;
  const std::vector<float> x = random_floats(rows * cols, -1.0f, 1.0f, 1);
  const std::vector<float> y0 = random_floats(rows * cols, -1.0f, 1.0f, 2);
  const std::vector<float> bias = random_floats(cols, -1.0f, 1.0f, 3);
  const std::vector<float> dbias0 = random_floats(cols, -1.0f, 1.0f, 4);

  std::vector<float> y = y0;
  cpu::add_inplace(y.data(), x.data(), y.size());
  std::vector<double> expected(rows * cols);
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = static_cast<double>(y0[i]) + x[i];
  EXPECT_TRUE(all_close(y, expected, 1e-7, 0.0));

  y = y0;
  cpu::bias_add(y.data(), bias.data(), rows, cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      expected[r * cols + c] = static_cast<double>(y0[r * cols + c]) + bias[c];
  EXPECT_TRUE(all_close(y, expected, 1e-7, 0.0));

  std::vector<float> dbias = dbias0;
  cpu::bias_grad(x.data(), dbias.data(), rows, cols);
  std::vector<double> expected_dbias(dbias0.begin(), dbias0.end());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      expected_dbias[c] += x[r * cols + c];
  EXPECT_TRUE(all_close(dbias, expected_dbias, 1e-5, 1e-6));
}

TEST(ModelOpsCpu, EmbeddingGathersRowsAndScattersGradients) {
  const std::size_t vocab = 11, features = 6, rows = 29;
  const std::vector<float> table = random_floats(vocab * features, -1.0f, 1.0f, 5);
  const std::vector<float> dy = random_floats(rows * features, -1.0f, 1.0f, 6);
  const std::vector<std::int32_t> tokens = random_tokens(rows, vocab, 7);
  std::vector<float> y(rows * features);
  cpu::embedding_forward(tokens.data(), table.data(), y.data(), rows, features, vocab);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < features; ++c)
      ASSERT_EQ(y[r * features + c], table[static_cast<std::size_t>(tokens[r]) * features + c]) << r << "," << c;

  std::vector<float> grad(vocab * features, 0.5f);
  cpu::embedding_backward(tokens.data(), dy.data(), grad.data(), rows, features);
  std::vector<double> expected(vocab * features, 0.5);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < features; ++c)
      expected[static_cast<std::size_t>(tokens[r]) * features + c] += dy[r * features + c];
  EXPECT_TRUE(all_close(grad, expected, 1e-5, 1e-6));
}

TEST(ModelOpsCpu, EmbeddingRejectsATokenOutsideTheVocabularyNamingTheRow) {
  const std::vector<float> table(4 * 2, 1.0f);
  const std::vector<std::int32_t> tokens = {0, 3, 4};
  std::vector<float> y(3 * 2);
  try {
    cpu::embedding_forward(tokens.data(), table.data(), y.data(), 3, 2, 4);
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("token 4 at row 2"), std::string::npos) << e.what();
  }
}

// Three ranks' slices of one table: each gives the held rows and zeros elsewhere, so their sum is the whole lookup, and
// each slice's gradient is the whole gradient's rows of that slice.
TEST(ModelOpsCpu, EmbeddingSlicesSumToTheWholeLookupAndSplitItsGradient) {
  const std::size_t vocab = 13, features = 5, rows = 31;
  const std::size_t begins[] = {0, 5, 9}, locals[] = {5, 4, 4};
  const std::vector<float> table = random_floats(vocab * features, -1.0f, 1.0f, 15);
  const std::vector<float> dy = random_floats(rows * features, -1.0f, 1.0f, 16);
  const std::vector<std::int32_t> tokens = random_tokens(rows, vocab, 17);
  std::vector<float> whole(rows * features), whole_grad(vocab * features, 0.0f);
  cpu::embedding_forward(tokens.data(), table.data(), whole.data(), rows, features, vocab);
  cpu::embedding_backward(tokens.data(), dy.data(), whole_grad.data(), rows, features);
  std::vector<double> sum(rows * features, 0.0);
  for (int s = 0; s < 3; ++s) {
    std::vector<float> y(rows * features, 7.0f), grad(locals[s] * features, 0.0f);
    cpu::embedding_slice_forward(tokens.data(), table.data() + begins[s] * features, y.data(), rows, features, vocab,
                                 begins[s], locals[s]);
    for (std::size_t r = 0; r < rows; ++r) {
      const bool held = static_cast<std::size_t>(tokens[r]) >= begins[s] &&
                        static_cast<std::size_t>(tokens[r]) < begins[s] + locals[s];
      for (std::size_t c = 0; c < features; ++c) {
        ASSERT_EQ(y[r * features + c], held ? whole[r * features + c] : 0.0f) << "slice " << s << " row " << r;
        sum[r * features + c] += y[r * features + c];
      }
    }
    cpu::embedding_slice_backward(tokens.data(), dy.data(), grad.data(), rows, features, begins[s], locals[s]);
    for (std::size_t i = 0; i < grad.size(); ++i)
      ASSERT_EQ(grad[i], whole_grad[begins[s] * features + i]) << "slice " << s << " element " << i;
  }
  EXPECT_TRUE(all_close(whole, sum, 0.0, 0.0));
}

TEST(ModelOpsCpu, EmbeddingSliceRejectsABadTokenOrASliceOutsideTheVocabulary) {
  const std::vector<float> table(2 * 3, 1.0f);
  std::vector<float> y(3 * 3);
  const std::vector<std::int32_t> bad = {0, 5, 1};
  try {
    cpu::embedding_slice_forward(bad.data(), table.data(), y.data(), 3, 3, 4, 2, 2);
    ADD_FAILURE() << "a token outside the vocabulary was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("token 5 at row 1"), std::string::npos) << e.what();
  }
  const std::vector<std::int32_t> good = {0, 3, 1};
  try {
    cpu::embedding_slice_forward(good.data(), table.data(), y.data(), 3, 3, 4, 3, 2);
    ADD_FAILURE() << "a slice past the vocabulary was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not inside the vocabulary"), std::string::npos) << e.what();
  }
}

// The phases over two vocabulary halves, with the reductions between them done here as tensor parallelism would, give
// the float64 softmax cross-entropy and its gradient.
TEST(ModelOpsCpu, VocabParallelPhasesOverTwoShardsMatchFloat64) {
  const std::size_t rows = 23, vocab = 50, half = vocab / 2;
  const std::vector<float> logits = random_floats(rows * vocab, -8.0f, 8.0f, 8);
  const std::vector<std::int32_t> targets = random_tokens(rows, vocab, 9);
  const float grad_scale = 0.25f;

  std::vector<std::vector<float>> shard(2, std::vector<float>(rows * half));
  for (int s = 0; s < 2; ++s)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < half; ++c)
        shard[s][r * half + c] = logits[r * vocab + s * half + c];
  std::vector<std::vector<float>> row_max(2, std::vector<float>(rows));
  for (int s = 0; s < 2; ++s)
    cpu::ce_row_max(shard[s].data(), rows, half, row_max[s].data());
  std::vector<float> global_max(rows);
  for (std::size_t r = 0; r < rows; ++r)
    global_max[r] = std::fmax(row_max[0][r], row_max[1][r]);
  std::vector<std::vector<double>> sums(2, std::vector<double>(2 * rows));
  for (int s = 0; s < 2; ++s)
    cpu::ce_row_sums(shard[s].data(), targets.data(), rows, half, s * half, global_max.data(), sums[s].data());
  std::vector<double> total(2 * rows);
  for (std::size_t i = 0; i < total.size(); ++i)
    total[i] = sums[0][i] + sums[1][i];
  std::vector<std::vector<float>> dlogits(2, std::vector<float>(rows * half));
  double loss[2];
  for (int s = 0; s < 2; ++s)
    loss[s] = cpu::ce_finish(shard[s].data(), targets.data(), dlogits[s].data(), rows, half, s * half,
                             global_max.data(), total.data(), grad_scale);
  EXPECT_EQ(loss[0], loss[1]) << "every rank computes the same loss from the reduced sums";

  double expected_loss = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity(), z = 0.0;
    for (std::size_t c = 0; c < vocab; ++c)
      m = std::max(m, static_cast<double>(logits[r * vocab + c]));
    for (std::size_t c = 0; c < vocab; ++c)
      z += std::exp(logits[r * vocab + c] - m);
    expected_loss += std::log(z) + m - logits[r * vocab + static_cast<std::size_t>(targets[r])];
    for (int s = 0; s < 2; ++s) {
      std::vector<float> got(half);
      std::vector<double> want(half);
      for (std::size_t c = 0; c < half; ++c) {
        const std::size_t g = s * half + c;
        got[c] = dlogits[s][r * half + c];
        want[c] = (std::exp(logits[r * vocab + g] - m) / z - (g == static_cast<std::size_t>(targets[r]) ? 1.0 : 0.0)) *
                  grad_scale;
      }
      EXPECT_TRUE(all_close(got, want, 1e-5, 1e-7)) << "row " << r << " shard " << s;
    }
  }
  EXPECT_NEAR(loss[0], expected_loss, 1e-9 * expected_loss);

  // With one shard the phases agree with the fused single-rank kernel (which folds 1/rows into its gradient scale).
  std::vector<float> one_max(rows);
  std::vector<double> one_sums(2 * rows);
  cpu::ce_row_max(logits.data(), rows, vocab, one_max.data());
  cpu::ce_row_sums(logits.data(), targets.data(), rows, vocab, 0, one_max.data(), one_sums.data());
  const double one = cpu::ce_finish(logits.data(), targets.data(), nullptr, rows, vocab, 0, one_max.data(),
                                    one_sums.data(), grad_scale);
  EXPECT_NEAR(one, cpu::softmax_cross_entropy(logits.data(), targets.data(), nullptr, rows, vocab, 1.0f), 1e-9 * one);
}

// The output head pads each row of its logits to an aligned stride: the phases read and write only the first
// vocab_local columns of each row, with the same results as on packed rows, bit for bit.
TEST(VocabParallelLoss, StridedRowsGiveThePackedResultsAndLeaveThePaddingAlone) {
  const std::size_t rows = 19, vocab = 37, ld = 64, vocab_begin = 5, vocab_all = 60;
  const std::vector<float> packed = random_floats(rows * vocab, -8.0f, 8.0f, 21);
  const std::vector<std::int32_t> targets = random_tokens(rows, vocab_all, 22);
  const float pad = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> strided(rows * ld, pad);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < vocab; ++c)
      strided[r * ld + c] = packed[r * vocab + c];

  std::vector<float> max_packed(rows), max_strided(rows);
  cpu::ce_row_max(packed.data(), rows, vocab, max_packed.data());
  cpu::ce_row_max(strided.data(), rows, vocab, max_strided.data(), ld);
  EXPECT_EQ(max_strided, max_packed);  // max skips a NaN: the sums below are what turn NaN if the padding is read
  std::vector<double> sums_packed(2 * rows), sums_strided(2 * rows);
  cpu::ce_row_sums(packed.data(), targets.data(), rows, vocab, vocab_begin, max_packed.data(), sums_packed.data());
  cpu::ce_row_sums(strided.data(), targets.data(), rows, vocab, vocab_begin, max_packed.data(), sums_strided.data(),
                   ld);
  EXPECT_EQ(sums_strided, sums_packed);
  std::vector<float> grad_packed(rows * vocab);
  const double loss_packed = cpu::ce_finish(packed.data(), targets.data(), grad_packed.data(), rows, vocab, vocab_begin,
                                            max_packed.data(), sums_packed.data(), 0.5f);
  // In place, as the head calls it.
  const double loss_strided = cpu::ce_finish(strided.data(), targets.data(), strided.data(), rows, vocab, vocab_begin,
                                             max_packed.data(), sums_packed.data(), 0.5f, ld);
  EXPECT_EQ(loss_strided, loss_packed);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < vocab; ++c)
      ASSERT_EQ(strided[r * ld + c], grad_packed[r * vocab + c]) << r << ", " << c;
    for (std::size_t c = vocab; c < ld; ++c)
      ASSERT_TRUE(std::isnan(strided[r * ld + c])) << "padding written at " << r << ", " << c;
  }

  // A stride below the row would make rows overlap.
  EXPECT_THROW(cpu::ce_row_max(packed.data(), rows, vocab, max_packed.data(), vocab - 1), UsageError);
  EXPECT_THROW(cpu::ce_finish(packed.data(), targets.data(), nullptr, rows, vocab, 0, max_packed.data(),
                              sums_packed.data(), 1.0f, 8),
               UsageError);
}

}  // namespace
}  // namespace tenax::kernels
