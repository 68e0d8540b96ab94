// One row of the causal softmax and of its backward on the CPU, shared by the row kernels (cpu/causal_softmax.cpp) and
// the fused attention core (cpu/attention.cpp), so that both compute every probability bit for bit the same way.
//
// Reductions run over kLanes fixed lanes (lane l takes elements j with j % kLanes == l) that are then combined in
// double in lane order: the loops vectorise (a float sum into one accumulator does not without reassociation), and the
// result does not depend on the vector width the compiler picks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/vector_exp.hpp"
#include "tenax/kernels/half.hpp"

namespace tenax::kernels::detail {

inline constexpr std::size_t kSoftmaxLanes = 16;

// exp(x) for finite x <= 0: vector_exp's steps without its overflow and NaN handling, which the softmax's arguments
// (finite score minus the row maximum) never need. Bit for bit vector_exp(x) on that domain (the same reduction and
// polynomial; tests/kernels/attention_rows_test.cpp compares them), at about half the instructions.
inline float softmax_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;
  constexpr float kMinArg = -87.3365447504019f;
  const bool under = x < kMinArg;  // the result would be subnormal: flushed to 0, as vector_exp does
  const float c = bits_float(select_bits(under, float_bits(kMinArg), float_bits(x)));
  const float n = (c * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (c - n * kLn2Hi) - n * kLn2Lo;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  const std::uint32_t scale = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  return bits_float(select_bits(under, 0u, float_bits(p * bits_float(scale))));
}

// row[0, valid) holds scores; afterwards row[0, valid) holds their softmax of scale*score and row[valid, width) zeros.
// valid >= 1 (a causal row always sees its own position).
inline void causal_softmax_row(float* row, std::size_t valid, std::size_t width, float scale) {
  constexpr std::size_t L = kSoftmaxLanes;
  const std::size_t full = valid / L * L;
  // The maximum (`x > m ? x : m` is exactly MAXPS), and whether any scaled score is infinite or NaN.
  float lane_max[L];
  std::uint32_t nonfinite = 0;
  for (std::size_t l = 0; l < L; ++l)
    lane_max[l] = -__builtin_inff();
  for (std::size_t j = 0; j < full; j += L)
    for (std::size_t l = 0; l < L; ++l) {
      const float x = scale * row[j + l];
      lane_max[l] = x > lane_max[l] ? x : lane_max[l];
    }
  for (std::size_t j = full; j < valid; ++j) {
    const float x = scale * row[j];
    lane_max[0] = x > lane_max[0] ? x : lane_max[0];
  }
  for (std::size_t j = 0; j < valid; ++j)
    nonfinite |= (float_bits(scale * row[j]) & 0x7F800000u) == 0x7F800000u;
  float m = lane_max[0];
  for (std::size_t l = 1; l < L; ++l)
    m = lane_max[l] > m ? lane_max[l] : m;
  // Every exponent is <= 0: no overflow, and the maximum's own term is exactly 1, so the sum is >= 1. A row with a NaN
  // or infinite scaled score takes the general vector_exp instead, whose special values keep the result what it was
  // before this fast path (NaN for a NaN or +inf score, 0 for a -inf one): garbage in stays visible.
  if (nonfinite == 0) {
    for (std::size_t j = 0; j < valid; ++j)
      row[j] = softmax_exp(scale * row[j] - m);
  } else {
    for (std::size_t j = 0; j < valid; ++j)
      row[j] = vector_exp(scale * row[j] - m);
  }
  float lane_sum[L] = {};
  for (std::size_t j = 0; j < full; j += L)
    for (std::size_t l = 0; l < L; ++l)
      lane_sum[l] += row[j + l];
  for (std::size_t j = full; j < valid; ++j)
    lane_sum[0] += row[j];
  double sum = 0.0;
  for (std::size_t l = 0; l < L; ++l)
    sum += lane_sum[l];
  const float inv = static_cast<float>(1.0 / sum);
  for (std::size_t j = 0; j < valid; ++j)
    row[j] *= inv;
  for (std::size_t j = valid; j < width; ++j)
    row[j] = 0.0f;
}

// ds[0, valid) = scale * p * (dp - sum_j dp*p) over the row's valid entries, ds[valid, width) = 0. ds may alias dp.
inline void causal_softmax_backward_row(const float* p, const float* dp, float* ds, std::size_t valid,
                                        std::size_t width, float scale) {
  constexpr std::size_t L = kSoftmaxLanes;
  const std::size_t full = valid / L * L;
  float lane_dot[L] = {};
  for (std::size_t j = 0; j < full; j += L)
    for (std::size_t l = 0; l < L; ++l)
      lane_dot[l] += dp[j + l] * p[j + l];
  for (std::size_t j = full; j < valid; ++j)
    lane_dot[0] += dp[j] * p[j];
  double dot = 0.0;
  for (std::size_t l = 0; l < L; ++l)
    dot += lane_dot[l];
  const float c = static_cast<float>(dot);
  for (std::size_t j = 0; j < valid; ++j)
    ds[j] = scale * p[j] * (dp[j] - c);
  for (std::size_t j = valid; j < width; ++j)
    ds[j] = 0.0f;
}

}  // namespace tenax::kernels::detail
