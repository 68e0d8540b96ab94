// exp(x) for fp32 written so that loops over arrays vectorise on the CPU (libm's expf is an opaque call that stops
// the vectoriser, and the CPU GeLU and cross-entropy kernels spend nearly all their time in it). Within 2 ulp of the
// correctly rounded result over the whole range, with exact special values: exp(-inf) = 0, exp(inf) = inf, NaN stays
// NaN, underflow gives 0 and overflow inf. CPU only: device code uses CUDA's expf.
#pragma once

#include <cstdint>

#include "tenax/kernels/half.hpp"

namespace tenax::kernels::detail {

inline float vector_exp(float x) {
  // exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln(2)/2; ln 2 is split in two (Cody & Waite) so that
  // r = x - n ln2 is exact enough; exp(r) is the Cephes degree-6 minimax polynomial.
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (nearest even)
  constexpr float kMaxArg = 88.3762626647949f;
  constexpr float kMinArg = -87.3365447504019f;  // below: the result would be subnormal; flushed to 0
  // Clamped with bit selects, not ?: on floats, which GCC keeps as branches (and then will not vectorise). NaN fails
  // every comparison, so `!(x >= kMinArg)` sends it to kMinArg too: converting a NaN `n` to int below would be
  // undefined behaviour (the NaN result is restored at the end).
  const float clamped = bits_float(select_bits(!(x >= kMinArg), float_bits(kMinArg),
                                               select_bits(x > kMaxArg, float_bits(kMaxArg), float_bits(x))));
  const float n = (clamped * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // 2^n built in the exponent field (n is in [-126, 127] after the clamp).
  const std::uint32_t scale = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  const std::uint32_t value = float_bits(p * bits_float(scale));
  const std::uint32_t xb = float_bits(x);
  const bool is_nan = (xb & 0x7FFFFFFFu) > 0x7F800000u;
  std::uint32_t out = select_bits(x > kMaxArg, 0x7F800000u, value);  // overflow (and +inf) -> inf
  out = select_bits(x < kMinArg, 0u, out);                           // underflow (and -inf) -> 0
  return bits_float(select_bits(is_nan, xb | 0x00400000u, out));     // NaN stays NaN (quiet)
}

}  // namespace tenax::kernels::detail
