// Scalar formulas shared by the CPU reference kernels and the CUDA kernels (host and device), so both compute the same
// expression in the same order.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/vector_exp.hpp"
#include "tenax/dtype.hpp"
#include "tenax/kernels/half.hpp"

namespace tenax::kernels::detail {

// The constants of the tanh approximation of GeLU (Hendrycks & Gimpel), as GPT-2 uses it.
inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

// exp for the kernels: CUDA's expf on the device, the vectorisable vector_exp on the host.
TENAX_HOST_DEVICE inline float kernel_exp(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return vector_exp(x);
#endif
}

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u) exactly, and the sigmoid form needs one exp and no tanh: it is several times
// faster on the CPU (libm's tanhf is slow) and has no cancellation where 1 + tanh(u) -> 0 for negative x. The exp
// argument is capped so that exp() stays finite: beyond it the sigmoid is below 1e-34 either way.
TENAX_HOST_DEVICE inline float gelu_exp_neg2u(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float a = -2.0f * u;
  // min(a, 80) as a bit select: fminf would be a libm call on the host (no vectorising) and would turn NaN into 80.
  return kernel_exp(bits_float(select_bits(a > 80.0f, float_bits(80.0f), float_bits(a))));
}

TENAX_HOST_DEVICE inline float gelu_tanh(float x) {
  return x / (1.0f + gelu_exp_neg2u(x));
}

// d/dx [x s(x)] with s = sigmoid(2u): s + x * 2 s (1 - s) * u'(x), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2), and
// 1 - s = e * s with e = exp(-2u) (no cancellation as s -> 1).
TENAX_HOST_DEVICE inline float gelu_tanh_grad(float x) {
  const float e = gelu_exp_neg2u(x);
  const float s = 1.0f / (1.0f + e);
  const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return s + 2.0f * x * s * (e * s) * du;
}

// A float is NaN or ±inf exactly when its exponent bits are all ones; a bit test (unlike std::isfinite under
// -ffast-math) cannot be optimised away, and it vectorises.
TENAX_HOST_DEVICE inline bool is_nonfinite(float x) {
  return (float_bits(x) & 0x7F800000u) == 0x7F800000u;
}

// Per-step AdamW scalars, computed once on the host in double (1 - beta^step underflows nothing in double).
struct AdamWScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2;
  float decay;         // 1 - lr * weight_decay
  float step_size;     // lr / (1 - beta1^step)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^step)
  float eps;
};

inline AdamWScalars adamw_scalars(float lr, float beta1, float beta2, float eps, float weight_decay, long step) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  return {beta1,
          beta2,
          1.0f - beta1,
          1.0f - beta2,
          static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay),
          static_cast<float>(lr / bc1),
          static_cast<float>(1.0 / std::sqrt(bc2)),
          eps};
}

// One AdamW element update; returns the new weight.
TENAX_HOST_DEVICE inline float adamw_update(const AdamWScalars& s, float w, float& m, float& v, float g) {
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  const float denom = sqrtf(v) * s.inv_sqrt_bc2 + s.eps;
  return w * s.decay - s.step_size * (m / denom);
}

// One SGD-momentum element update; returns the new weight.
TENAX_HOST_DEVICE inline float sgd_update(float lr, float momentum, float weight_decay, bool nesterov, float w,
                                          float& vel, float g) {
  g += weight_decay * w;
  vel = momentum * vel + g;
  const float d = nesterov ? g + momentum * vel : vel;
  return w - lr * d;
}

// The low-precision copy of one value, as the raw element the lowp buffer holds.
TENAX_HOST_DEVICE inline std::uint16_t to_lowp16(float x, bool bf16) {
  return bf16 ? float_to_bf16_bits(x) : float_to_f16_bits(x);
}

}  // namespace tenax::kernels::detail
