// Array casts between fp32 and bf16/f16/f32 (16-bit values are passed as their raw bits), round-to-nearest-even with
// the exact semantics of half.hpp (NaN stays NaN, ±inf stays ±inf, overflow becomes ±inf, subnormals are exact).
// The CPU versions are the reference; the CUDA versions (cuda::) produce bitwise identical results on device pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tenax/dtype.hpp"
#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

// in: n elements of in_type (F32, BF16 or F16); out: n floats. Any other type throws UsageError.
void cast_to_f32(const void* in, DType in_type, float* out, std::size_t n);
// in: n floats; out: n elements of out_type (F32, BF16 or F16). Any other type throws UsageError.
void cast_from_f32(const float* in, void* out, DType out_type, std::size_t n);

namespace cpu {
using tenax::kernels::cast_from_f32;
using tenax::kernels::cast_to_f32;
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// Device pointers; asynchronous on `stream` (a cudaStream_t, nullptr = default stream). in and out must not overlap
// unless both types are F32 and in == out.
void cast_to_f32(const void* in, DType in_type, float* out, std::size_t n, void* stream);
void cast_from_f32(const float* in, void* out, DType out_type, std::size_t n, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
