#include "tenax/kernels/cast.hpp"

#include <cstring>

#include "common/cpu_clones.hpp"
#include "common/validate.hpp"
#include "tenax/kernels/half.hpp"

namespace tenax::kernels {

TENAX_CPU_CLONES void cast_to_f32(const void* in, DType in_type, float* out, std::size_t n) {
  detail::require_lowp_type("cast_to_f32", in_type, "in_type");
  detail::require_pointer("cast_to_f32", in, n, "in");
  detail::require_pointer("cast_to_f32", out, n, "out");
  const auto* in16 = static_cast<const std::uint16_t*>(in);
  switch (in_type) {
    case DType::F32:
      if (n) std::memmove(out, in, n * sizeof(float));
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = bf16_bits_to_float(in16[i]);
      return;
    default:  // F16 (require_lowp_type let nothing else through)
      for (std::size_t i = 0; i < n; ++i)
        out[i] = f16_bits_to_float(in16[i]);
      return;
  }
}

TENAX_CPU_CLONES void cast_from_f32(const float* in, void* out, DType out_type, std::size_t n) {
  detail::require_lowp_type("cast_from_f32", out_type, "out_type");
  detail::require_pointer("cast_from_f32", in, n, "in");
  detail::require_pointer("cast_from_f32", out, n, "out");
  auto* out16 = static_cast<std::uint16_t*>(out);
  switch (out_type) {
    case DType::F32:
      if (n) std::memmove(out, in, n * sizeof(float));
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i)
        out16[i] = float_to_bf16_bits(in[i]);
      return;
    default:  // F16
      for (std::size_t i = 0; i < n; ++i)
        out16[i] = float_to_f16_bits(in[i]);
      return;
  }
}

}  // namespace tenax::kernels
