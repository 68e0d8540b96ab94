// Internal (tenax/optimizer.hpp is the public API). Fused optimizer steps on fp32 master weights (AdamWParams and
// SgdParams, the updates they define, are in tenax/kernels/params.hpp). Each reads the gradient and the optimizer state
// once, writes the new state and master weights, and (when asked) the low-precision copy of the new weights used by the
// next forward pass, all in one pass over memory.
#pragma once

#include <cstddef>

#include "tenax/dtype.hpp"
#include "tenax/kernels/config.hpp"
#include "tenax/kernels/params.hpp"

namespace tenax::kernels {

namespace cpu {
// Updates master, m and v (n elements each) in place from grad. If lowp_out is not null it receives the new master
// weights rounded to lowp_type (F32, BF16 or F16; 16-bit types as raw bits). Throws UsageError for step < 1, a beta
// outside [0, 1), eps <= 0 or an unsupported lowp_type.
void adamw_step(float* master, float* m, float* v, const float* grad, void* lowp_out, DType lowp_type, std::size_t n,
                const AdamWParams& p);
// Updates master and velocity in place from grad; lowp_out as for adamw_step. velocity may be null only when
// momentum == 0. Throws UsageError for a negative momentum, nesterov without momentum or an unsupported lowp_type.
void sgd_momentum_step(float* master, float* velocity, const float* grad, void* lowp_out, DType lowp_type,
                       std::size_t n, const SgdParams& p);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers; asynchronous on `stream`. Same validation (thrown before any launch).
void adamw_step(float* master, float* m, float* v, const float* grad, void* lowp_out, DType lowp_type, std::size_t n,
                const AdamWParams& p, void* stream);
void sgd_momentum_step(float* master, float* velocity, const float* grad, void* lowp_out, DType lowp_type,
                       std::size_t n, const SgdParams& p, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
