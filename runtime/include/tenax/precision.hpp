// Mixed-precision policy: which dtype the model weights, activations and pipeline messages use, with fp32 master
// weights held by the optimizer in every mode.
//
//   fp32  weights, activations and gradients in fp32; the master weights are the model weights.
//   bf16  model weights stored in bf16 (the optimizer writes them from the fp32 master in the same pass as the update);
//         activations rounded to bf16 at layer boundaries and sent between pipeline stages as bf16; gradients are
//         accumulated and all-reduced in fp32 (as Megatron's accumulate_allreduce_grads_in_fp32).
//   fp16  as bf16 with fp16, plus dynamic loss scaling (tenax/loss_scaler.hpp): the loss gradient is multiplied by the
//         scale, gradients are unscaled and checked for inf/NaN before the update, and a step with any non-finite
//         gradient on any rank is skipped by every rank.
//
// The CPU kernels compute in fp32; the 16-bit modes round to the 16-bit format where a GPU implementation would store
// 16-bit values, so the numerics (including fp16 overflow) are those of a 16-bit run.
#pragma once

#include <cstddef>
#include <string_view>

#include "tenax/dtype.hpp"

namespace tenax {

enum class Precision { Fp32, Bf16, Fp16 };

struct PrecisionPolicy {
  Precision precision = Precision::Fp32;

  // "fp32", "bf16" or "fp16" (also "f32", "float32", "bfloat16", "f16", "float16"). Throws UsageError naming the
  // choices.
  static PrecisionPolicy parse(std::string_view text);

  // dtype of the model weights and of activations at layer boundaries and on the pipeline wire.
  DType param_dtype() const;
  // Gradients are always fp32 (accumulation across micro-batches and the data-parallel reduction happen in fp32).
  DType grad_dtype() const { return DType::F32; }
  bool uses_loss_scaling() const { return precision == Precision::Fp16; }
  std::string_view name() const;
};

// Rounds n fp32 values in place to the nearest value representable in `dtype` (F32: no-op; BF16/F16: round to nearest
// even, overflow to ±inf). `scratch` must hold n 16-bit values when dtype is BF16 or F16.
void round_to_dtype(float* values, std::size_t n, DType dtype, void* scratch);

// Makes the CPU path bitwise reproducible: OpenBLAS runs single-threaded, so every matrix product sums in a fixed order
// (the multi-threaded split depends on the thread count). Call once at start, before any matrix product.
void set_deterministic_cpu_math();

}  // namespace tenax
