// Gradient unscaling fused with the non-finite check used by mixed precision (the loss scaler): one read and one write
// of each gradient; with a factor of one (the check alone, before an update nothing else inspects) one read.
#pragma once

#include <cstddef>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// grad[i] *= inv_scale for i < n (inv_scale == 1: grad is only read). If any gradient is NaN or ±inf before or after
// scaling, sets *found_nonfinite = 1.0f. The flag is never reset here: the caller zeroes it once per step, so several
// gradient buffers share one flag.
void unscale_and_check(float* grad, std::size_t n, float inv_scale, float* found_nonfinite);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As cpu::unscale_and_check; grad and found_nonfinite are device pointers. Asynchronous on `stream`.
void unscale_and_check(float* grad, std::size_t n, float inv_scale, float* found_nonfinite, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
