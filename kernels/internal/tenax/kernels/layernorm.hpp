// Layer normalisation over the last dimension of a row-major [rows x cols] block, with per-column gain and bias:
//   y = (x - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(var + eps)  (biased variance, as PyTorch's LayerNorm).
// The forward pass saves mean and rstd per row for the backward pass.
#pragma once

#include <cstddef>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// y may alias x. mean and rstd receive `rows` values each. Throws UsageError for eps <= 0 or cols == 0.
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       std::size_t rows, std::size_t cols, float eps);
// From the forward input x and its saved mean/rstd: dx (written; may alias dy) and dgamma[c] += sum_r dy*xhat,
// dbeta[c] += sum_r dy (accumulated across micro-batches like every parameter gradient).
void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                        float* dx, float* dgamma, float* dbeta, std::size_t rows, std::size_t cols);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers, asynchronous on `stream` (dgamma/dbeta are added with atomics).
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       std::size_t rows, std::size_t cols, float eps, void* stream);
void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                        float* dx, float* dgamma, float* dbeta, std::size_t rows, std::size_t cols, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
