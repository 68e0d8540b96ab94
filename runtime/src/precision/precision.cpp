#include "tenax/precision.hpp"

#include <string>

#include "tenax/error.hpp"
#include "tenax/kernels/cast.hpp"

// Declared here rather than through cblas.h: only OpenBLAS has it, and the prototype is all that is needed.
extern "C" void openblas_set_num_threads(int num_threads);

namespace tenax {

void set_deterministic_cpu_math() {
  openblas_set_num_threads(1);
}

PrecisionPolicy PrecisionPolicy::parse(std::string_view text) {
  if (text == "fp32" || text == "f32" || text == "float32") return {Precision::Fp32};
  if (text == "bf16" || text == "bfloat16") return {Precision::Bf16};
  if (text == "fp16" || text == "f16" || text == "float16") return {Precision::Fp16};
  throw UsageError("unknown precision '" + std::string(text) + "': use fp32, bf16 or fp16");
}

DType PrecisionPolicy::param_dtype() const {
  switch (precision) {
    case Precision::Bf16:
      return DType::BF16;
    case Precision::Fp16:
      return DType::F16;
    case Precision::Fp32:
      break;
  }
  return DType::F32;
}

std::string_view PrecisionPolicy::name() const {
  switch (precision) {
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp16:
      return "fp16";
    case Precision::Fp32:
      break;
  }
  return "fp32";
}

void round_to_dtype(float* values, std::size_t n, DType dtype, void* scratch) {
  if (dtype == DType::F32 || n == 0) return;
  // Through the cast kernels rather than a local loop, so the rounding is bit-for-bit the one the GPU path uses.
  kernels::cpu::cast_from_f32(values, scratch, dtype, n);
  kernels::cpu::cast_to_f32(scratch, dtype, values, n);
}

}  // namespace tenax
