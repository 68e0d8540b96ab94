// Scalar conversions between fp32 and the 16-bit float formats, shared by the CPU reference kernels, the CUDA kernels
// (they are __host__ __device__) and the CPU communicator. All rounding is IEEE round-to-nearest-even; NaN stays NaN
// (made quiet, sign and top payload bits kept), ±inf stays ±inf, values beyond the format's range become ±inf, and
// subnormals of both formats are produced and read exactly.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TENAX_HOST_DEVICE __host__ __device__
#else
#define TENAX_HOST_DEVICE
#endif

namespace tenax::kernels {

TENAX_HOST_DEVICE inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TENAX_HOST_DEVICE inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Every conversion below is branch-free (each case is computed, then picked with a bit mask rather than a ?: that the
// compiler may turn back into a branch): loops over arrays vectorise on the CPU and warps never diverge on the GPU.

TENAX_HOST_DEVICE inline std::uint32_t select_bits(bool condition, std::uint32_t if_true, std::uint32_t if_false) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

TENAX_HOST_DEVICE inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even; a carry correctly bumps the exponent
  // (and turns the largest finite values that round up into inf).
  const std::uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (x >> 16) | 0x0040u;
  return static_cast<std::uint16_t>(select_bits((x & 0x7FFFFFFFu) > 0x7F800000u, quiet_nan, rounded));
}

TENAX_HOST_DEVICE inline float bf16_bits_to_float(std::uint16_t h) {
  return bits_float(std::uint32_t{h} << 16);
}

TENAX_HOST_DEVICE inline std::uint16_t float_to_f16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7FFFFFFFu;
  // Normal range [2^-14, 65520): round to nearest even at bit 13, then rebias the exponent from 127 to 15.
  const std::uint32_t normal = (a + 0xFFFu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  // Below 2^-14 (half subnormals and zero): in 0.5f + |f| the last mantissa bit is worth 2^-24, the half subnormal
  // step, so the FPU's own round-to-nearest-even does the rounding (up to the smallest normal when it carries).
  const std::uint32_t subnormal = float_bits(bits_float(a) + 0.5f) - 0x3F000000u;
  // NaN stays NaN (made quiet, top payload bits kept); inf and everything >= 65520 (which rounds up) becomes inf.
  const std::uint32_t special = select_bits(a > 0x7F800000u, 0x7E00u | ((a >> 13) & 0x3FFu), 0x7C00u);
  const std::uint32_t magnitude =
      select_bits(a >= 0x477FF000u, special, select_bits(a < 0x38800000u, subnormal, normal));
  return static_cast<std::uint16_t>(sign | magnitude);
}

TENAX_HOST_DEVICE inline float f16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  const std::uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
  const std::uint32_t inf_nan = 0x7F800000u | (mantissa << 13);
  // A subnormal (or zero) is mantissa * 2^-24: exact in fp32, so no normalisation loop is needed.
  const std::uint32_t subnormal = float_bits(static_cast<float>(mantissa) * 0x1p-24f);
  const std::uint32_t magnitude =
      select_bits(exponent == 0, subnormal, select_bits(exponent == 0x1Fu, inf_nan, normal));
  return bits_float(sign | magnitude);
}

}  // namespace tenax::kernels
