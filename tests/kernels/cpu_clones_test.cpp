// The CPU kernels compiled once per x86-64 level (TENAX_CPU_CLONES) compute exactly the bits of their scalar
// formulas. This file is compiled for the baseline (and without fused multiply-adds), one element at a time, from the
// same formulas (kernels/src/common/math.hpp, half.hpp), summing in the kernels' documented order; the library runs the
// clone of this CPU. A clone that fused a multiply-add, reordered a sum or changed a rounding would differ here in the
// last bit. NaN results are compared as NaN, not by payload. That the clones exist at all is checked by the ctest
// cpu_clones_present (tests/kernels/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/math.hpp"
#include "common/vector_exp.hpp"
#include "kernel_test_util.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/elementwise.hpp"
#include "tenax/kernels/loss.hpp"
#include "tenax/kernels/optimizer.hpp"
#include "tenax/kernels/unscale.hpp"
#include "tenax/kernels/vocab_parallel_loss.hpp"

namespace tenax::kernels {
namespace {

using test::random_floats;

// Odd sizes: every clone's vector loop and its scalar tail both run.
constexpr std::size_t kRows = 37, kCols = 133;

// Random values with the special ones spread through (so they land in vector lanes and in tails): NaN, infinities,
// values past exp's overflow and underflow, subnormals and signed zeros.
std::vector<float> inputs(std::size_t n, float lo, float hi, unsigned seed) {
  std::vector<float> v = random_floats(n, lo, hi, seed);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            1e30f,
                            -1e30f,
                            88.9f,
                            -104.0f,
                            1e-40f,
                            -0.0f,
                            0.0f};
  for (std::size_t i = 0, s = 0; i < n; i += 97, ++s)
    v[i] = specials[s % std::size(specials)];
  return v;
}

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int shown = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (bits(got[i]) != bits(want[i]) && shown++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << " (0x" << std::hex << bits(got[i]) << "), formula "
                    << want[i] << " (0x" << bits(want[i]) << ")" << std::dec;
  }
}

void expect_same_bits(double got, double want, const char* what) {
  if (std::isnan(got) && std::isnan(want)) return;
  std::uint64_t g, w;
  std::memcpy(&g, &got, sizeof g);
  std::memcpy(&w, &want, sizeof w);
  EXPECT_EQ(g, w) << what << " = " << got << ", formula " << want;
}

TEST(CpuClones, BiasGeluForwardAndBackwardAreTheFormulaBitForBit) {
  const std::vector<float> x = inputs(kRows * kCols, -8.0f, 8.0f, 1), bias = inputs(kCols, -1.0f, 1.0f, 2);
  const std::vector<float> dy = random_floats(kRows * kCols, -1.0f, 1.0f, 3);
  std::vector<float> y(x.size()), want_y(x.size()), dx(x.size()), want_dx(x.size());
  std::vector<float> dbias = random_floats(kCols, -1.0f, 1.0f, 4), want_dbias = dbias;
  cpu::bias_gelu_forward(x.data(), bias.data(), y.data(), kRows, kCols);
  cpu::bias_gelu_backward(x.data(), bias.data(), dy.data(), dx.data(), dbias.data(), kRows, kCols);
  std::vector<double> column(kCols, 0.0);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t c = 0; c < kCols; ++c) {
      const std::size_t i = r * kCols + c;
      want_y[i] = detail::gelu_tanh(x[i] + bias[c]);
      want_dx[i] = dy[i] * detail::gelu_tanh_grad(x[i] + bias[c]);
      column[c] += want_dx[i];
    }
  }
  for (std::size_t c = 0; c < kCols; ++c)
    want_dbias[c] = static_cast<float>(want_dbias[c] + column[c]);
  expect_same_bits(y, want_y, "gelu");
  expect_same_bits(dx, want_dx, "gelu dx");
  expect_same_bits(dbias, want_dbias, "gelu dbias");
}

TEST(CpuClones, ResidualAndBiasKernelsAreTheFormulaBitForBit) {
  const std::vector<float> x = inputs(kRows * kCols, -4.0f, 4.0f, 5), bias = inputs(kCols, -1.0f, 1.0f, 6);
  std::vector<float> y = inputs(kRows * kCols, -4.0f, 4.0f, 7), want = y;
  cpu::add_inplace(y.data(), x.data(), y.size());
  for (std::size_t i = 0; i < y.size(); ++i)
    want[i] += x[i];
  expect_same_bits(y, want, "add_inplace");
  cpu::bias_add(y.data(), bias.data(), kRows, kCols);
  for (std::size_t i = 0; i < y.size(); ++i)
    want[i] += bias[i % kCols];
  expect_same_bits(y, want, "bias_add");
  std::vector<float> dbias = random_floats(kCols, -1.0f, 1.0f, 8), want_dbias = dbias;
  cpu::bias_grad(x.data(), dbias.data(), kRows, kCols);
  for (std::size_t r = 0; r < kRows; ++r)
    for (std::size_t c = 0; c < kCols; ++c)
      want_dbias[c] += x[r * kCols + c];
  expect_same_bits(dbias, want_dbias, "bias_grad");
}

TEST(CpuClones, UnscaleAndCastsAreTheFormulaBitForBit) {
  const std::vector<float> g = inputs(kRows * kCols, -1e4f, 1e4f, 9);
  std::vector<float> scaled = g, want(g.size());
  float found = 0.0f;
  cpu::unscale_and_check(scaled.data(), scaled.size(), 1.0f / 1024.0f, &found);
  for (std::size_t i = 0; i < g.size(); ++i)
    want[i] = g[i] * (1.0f / 1024.0f);
  expect_same_bits(scaled, want, "unscale");
  EXPECT_EQ(found, 1.0f);  // the inputs hold NaN and infinities
  for (DType t : {DType::BF16, DType::F16}) {
    std::vector<std::uint16_t> low(g.size()), want_low(g.size());
    cpu::cast_from_f32(g.data(), low.data(), t, g.size());
    for (std::size_t i = 0; i < g.size(); ++i)
      want_low[i] = detail::to_lowp16(g[i], t == DType::BF16);
    for (std::size_t i = 0; i < g.size(); ++i) {
      const bool nan_both = t == DType::BF16 ? std::isnan(bf16_bits_to_float(low[i])) && std::isnan(g[i])
                                             : std::isnan(f16_bits_to_float(low[i])) && std::isnan(g[i]);
      if (!nan_both) {
        ASSERT_EQ(low[i], want_low[i]) << (t == DType::BF16 ? "bf16" : "f16") << " of " << g[i];
      }
    }
    std::vector<float> back(g.size()), want_back(g.size());
    cpu::cast_to_f32(low.data(), t, back.data(), g.size());
    for (std::size_t i = 0; i < g.size(); ++i)
      want_back[i] = t == DType::BF16 ? bf16_bits_to_float(low[i]) : f16_bits_to_float(low[i]);
    expect_same_bits(back, want_back, "cast_to_f32");
  }
}

// The low-precision copy an optimizer step writes beside the fp32 weights: none, fp32, bf16 or f16 (each its own
// clone).
void expect_copy(DType t, const std::vector<std::uint16_t>& low16, const std::vector<float>& low32,
                 const std::vector<float>& weights, const char* what) {
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (t == DType::F32) {
      ASSERT_EQ(bits(low32[i]), bits(weights[i])) << what << " fp32 copy " << i;
    } else if (t != DType::I32) {
      ASSERT_EQ(low16[i], detail::to_lowp16(weights[i], t == DType::BF16)) << what << " 16-bit copy " << i;
    }
  }
}

void* copy_buffer(DType t, std::vector<std::uint16_t>& low16, std::vector<float>& low32) {
  if (t == DType::F32) return low32.data();
  return t == DType::I32 ? nullptr : low16.data();  // I32 stands for "no copy" here
}

TEST(CpuClones, AdamwIsTheFormulaBitForBitWithEveryKindOfCopy) {
  const std::size_t n = kRows * kCols;
  const std::vector<float> grad = random_floats(n, -1.0f, 1.0f, 10);
  AdamWParams p;
  p.lr = 3e-4f;
  p.step = 7;
  const detail::AdamWScalars s = detail::adamw_scalars(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step);
  for (DType t : {DType::I32, DType::F32, DType::BF16, DType::F16}) {
    std::vector<float> master = random_floats(n, -1.0f, 1.0f, 11), m = random_floats(n, -0.1f, 0.1f, 12);
    std::vector<float> v = random_floats(n, 0.0f, 0.01f, 13);
    std::vector<float> want_master = master, want_m = m, want_v = v, low32(n);
    std::vector<std::uint16_t> low16(n);
    cpu::adamw_step(master.data(), m.data(), v.data(), grad.data(), copy_buffer(t, low16, low32),
                    t == DType::I32 ? DType::F32 : t, n, p);
    for (std::size_t i = 0; i < n; ++i)
      want_master[i] = detail::adamw_update(s, want_master[i], want_m[i], want_v[i], grad[i]);
    expect_same_bits(master, want_master, "adamw master");
    expect_same_bits(m, want_m, "adamw m");
    expect_same_bits(v, want_v, "adamw v");
    expect_copy(t, low16, low32, want_master, "adamw");
  }
}

TEST(CpuClones, SgdIsTheFormulaBitForBitWithAndWithoutMomentum) {
  const std::size_t n = kRows * kCols;
  const std::vector<float> grad = random_floats(n, -1.0f, 1.0f, 20);
  for (const float momentum : {0.0f, 0.9f}) {
    for (const bool nesterov : {false, true}) {
      if (nesterov && momentum == 0.0f) continue;  // refused: Nesterov needs momentum
      for (DType t : {DType::I32, DType::BF16}) {
        SgdParams p;
        p.lr = 0.05f;
        p.momentum = momentum;
        p.weight_decay = 0.01f;
        p.nesterov = nesterov;
        std::vector<float> master = random_floats(n, -1.0f, 1.0f, 21), velocity = random_floats(n, -0.1f, 0.1f, 22);
        std::vector<float> want_master = master, want_velocity = velocity, low32(n);
        std::vector<std::uint16_t> low16(n);
        cpu::sgd_momentum_step(master.data(), velocity.data(), grad.data(), copy_buffer(t, low16, low32),
                               t == DType::I32 ? DType::F32 : t, n, p);
        for (std::size_t i = 0; i < n; ++i) {
          float unused = 0.0f;
          float& vel = momentum == 0.0f ? unused : want_velocity[i];
          want_master[i] = detail::sgd_update(p.lr, momentum, p.weight_decay, nesterov, want_master[i], vel, grad[i]);
        }
        expect_same_bits(master, want_master, "sgd master");
        expect_same_bits(velocity, want_velocity, "sgd velocity");
        expect_copy(t, low16, low32, want_master, "sgd");
      }
    }
  }
}

TEST(CpuClones, CrossEntropyKernelsAreTheFormulaBitForBit) {
  // Finite logits (a NaN logit makes the whole row NaN in every clone; nothing to compare bit for bit).
  const std::size_t vocab = 1100;  // two 512-wide blocks and a tail
  const std::vector<float> logits = random_floats(kRows * vocab, -30.0f, 30.0f, 14);
  std::vector<std::int32_t> targets(kRows);
  for (std::size_t r = 0; r < kRows; ++r)
    targets[r] = static_cast<std::int32_t>((r * 131) % vocab);

  // softmax_cross_entropy: the row maximum, exp(x - max) into the gradient, summed in double in column order.
  std::vector<float> d(logits.size()), want_d(logits.size());
  const double loss = cpu::softmax_cross_entropy(logits.data(), targets.data(), d.data(), kRows, vocab, 2.0f);
  const float row_scale = 2.0f / static_cast<float>(kRows);
  double want_loss = 0.0;
  for (std::size_t r = 0; r < kRows; ++r) {
    const float* x = logits.data() + r * vocab;
    float max = x[0];
    for (std::size_t j = 1; j < vocab; ++j)
      max = x[j] > max ? x[j] : max;
    double sum = 0.0;
    for (std::size_t j = 0; j < vocab; ++j) {
      want_d[r * vocab + j] = detail::vector_exp(x[j] - max);
      sum += want_d[r * vocab + j];
    }
    const float scale = static_cast<float>(row_scale / sum);
    for (std::size_t j = 0; j < vocab; ++j)
      want_d[r * vocab + j] *= scale;
    want_d[r * vocab + static_cast<std::size_t>(targets[r])] -= row_scale;
    want_loss += std::log(sum) - (static_cast<double>(x[targets[r]]) - static_cast<double>(max));
  }
  expect_same_bits(d, want_d, "softmax_cross_entropy dlogits");
  expect_same_bits(loss, want_loss, "softmax_cross_entropy loss");

  // The vocabulary-parallel kernels on a slice [vocab_begin, vocab_begin + vocab): four double partial sums taken in
  // turn over the exponentials, the target's logit where the slice holds it.
  const std::size_t vocab_begin = 500;
  std::vector<float> row_max(kRows);
  cpu::ce_row_max(logits.data(), kRows, vocab, row_max.data());
  std::vector<double> sums(2 * kRows), want_sums(2 * kRows);
  cpu::ce_row_sums(logits.data(), targets.data(), kRows, vocab, vocab_begin, row_max.data(), sums.data());
  std::vector<float> dl(logits.size()), want_dl(logits.size());
  const double slice_loss = cpu::ce_finish(logits.data(), targets.data(), dl.data(), kRows, vocab, vocab_begin,
                                           row_max.data(), sums.data(), 0.5f);
  double want_slice_loss = 0.0;
  for (std::size_t r = 0; r < kRows; ++r) {
    const float* x = logits.data() + r * vocab;
    float max = -std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < vocab; ++j)
      max = std::max(max, x[j]);
    ASSERT_EQ(bits(row_max[r]), bits(max)) << "row " << r;
    double partial[4] = {0.0, 0.0, 0.0, 0.0};
    for (std::size_t begin = 0; begin < vocab; begin += 512) {
      const std::size_t n = std::min<std::size_t>(512, vocab - begin), whole = n / 4 * 4;
      for (std::size_t c = 0; c < n; ++c)
        partial[c < whole ? c % 4 : 0] += static_cast<double>(detail::vector_exp(x[begin + c] - max));
    }
    want_sums[r] = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    const auto t = static_cast<std::size_t>(targets[r]);
    const bool local = t >= vocab_begin && t < vocab_begin + vocab;
    want_sums[kRows + r] = local ? x[t - vocab_begin] : 0.0;
    want_slice_loss += std::log(want_sums[r]) + max - want_sums[kRows + r];
    const float scale = static_cast<float>(1.0 / want_sums[r]) * 0.5f;
    for (std::size_t j = 0; j < vocab; ++j)
      want_dl[r * vocab + j] = detail::vector_exp(x[j] - max) * scale;
    if (local) want_dl[r * vocab + (t - vocab_begin)] -= 0.5f;
  }
  for (std::size_t i = 0; i < sums.size(); ++i)
    expect_same_bits(sums[i], want_sums[i], "ce_row_sums");
  expect_same_bits(dl, want_dl, "ce_finish dlogits");
  expect_same_bits(slice_loss, want_slice_loss, "ce_finish loss");
}

}  // namespace
}  // namespace tenax::kernels
